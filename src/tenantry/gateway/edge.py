"""Strict checks on every request at the edge, before any op, backend or pilot.

JSON lets a client send things no later layer should have to handle: NUL
bytes and lone UTF-16 surrogates in any string (neither survives a C argv,
an SQLite text column read back as UTF-8, or the pilot protocol), control
characters in argv and paths, and ids that are not plain tokens. Each is
refused here with a ``UsageError`` naming the field.
"""

from __future__ import annotations

import re
from typing import Any

from tenantry.core.errors import UsageError

# paths: no control characters at all; argv words: none but tab and newline
# (``python -c`` code and commit messages hold newlines; ESC, CR, BEL... never)
_PATHS = frozenset({"cwd", "script", "output", "error", "path", "paths"})
_ARGV = frozenset({"argv", "args"})
_CONTROL = {
    "path": re.compile(r"[\x00-\x1f\x7f]"),
    "argv": re.compile(r"[\x00-\x08\x0b-\x1f\x7f]"),
}
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
MAX_DEPTH = 32


def check_text(value: str, where: str, *, strict: str = "") -> None:
    """Refuse NUL and lone surrogates; with ``strict`` ("path", "argv") control characters."""
    if "\x00" in value:
        raise UsageError(f"{where} contains a NUL byte", hint="remove the \\0 character")
    if _SURROGATE.search(value):
        raise UsageError(
            f"{where} contains a lone UTF-16 surrogate (not valid Unicode)",
            hint="send valid UTF-8 text",
        )
    if strict and _CONTROL[strict].search(value):
        raise UsageError(
            f"{where} contains a control character",
            hint="paths hold no control characters; argv words none but tab and newline",
        )


def check_params(value: Any, where: str = "params", depth: int = 0, strict: str = "") -> None:
    """Walk a request's JSON parameters; raise UsageError on the first bad value."""
    if depth > MAX_DEPTH:
        raise UsageError(f"{where} is nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        check_text(value, where, strict=strict)
    elif isinstance(value, dict):
        for key, item in value.items():
            check_text(key, f"{where} key {key[:40]!r}")
            kind = "path" if key in _PATHS else "argv" if key in _ARGV else ""
            check_params(item, f"{where}.{key}", depth + 1, strict or kind)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            check_params(item, f"{where}[{i}]", depth + 1, strict)
    elif isinstance(value, float) and value != value:  # NaN
        raise UsageError(f"{where} is NaN")


def request_id(raw: str | None) -> str:
    """The client's idempotency key, checked ("" when none was sent)."""
    if not raw:
        return ""
    if not _REQUEST_ID.match(raw):
        raise UsageError(
            "the request id header must be 1-128 characters of [A-Za-z0-9._:-]",
            hint="let the Tenantry client generate it",
        )
    return raw


def known_fields(params: dict[str, Any], allowed: frozenset[str], op: str) -> None:
    """Refuse parameters an op does not take (a typo must not be silently ignored)."""
    unknown = sorted(set(params) - allowed)
    if unknown:
        raise UsageError(
            f"{op} does not take parameter(s): {', '.join(u[:40] for u in unknown[:5])}",
            hint=f"its parameters are: {', '.join(sorted(allowed))}",
        )
