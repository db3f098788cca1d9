"""Wrappers that start an agent through ``tenantry agent`` (``tenantry install --wrapper DIR``).

Each wrapper is a small ``sh`` script named like the agent's own program
(``claude``, ``codex``, ``gemini``, ``opencode``, ``cursor-agent``). Put DIR
first on PATH and starting the agent starts a sandboxed session; the real
program's absolute path is found at install time (on PATH, skipping DIR).
Inside a sandbox already, a wrapper runs the real program directly.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from tenantry.core.errors import UsageError

# agent product -> the program users type
PROGRAMS: dict[str, str] = {
    "claude-code": "claude",
    "codex": "codex",
    "gemini-cli": "gemini",
    "opencode": "opencode",
    "cursor": "cursor-agent",
}
MARKER = "tenantry-agent-wrapper"

_TEMPLATE = """#!/bin/sh
# {marker} {program} (written by `tenantry install --wrapper`): {program} runs as a
# sandboxed Tenantry session. Remove this file to start {program} directly.
if [ "${{TENANTRY_SANDBOX:-}}" = 1 ]; then exec {real} "$@"; fi
exec {tenantry} agent --agent {product} -- {real} "$@"
"""


def render(product: str, real: str, tenantry: list[str]) -> str:
    program = PROGRAMS[product]
    return _TEMPLATE.format(
        marker=MARKER,
        program=program,
        product=shlex.quote(product),
        real=shlex.quote(real),
        tenantry=" ".join(shlex.quote(a) for a in tenantry),
    )


def find_real(program: str, skip: Path, path: str | None = None) -> str | None:
    dirs = [
        d
        for d in (path if path is not None else os.environ.get("PATH", "")).split(os.pathsep)
        if d and Path(d).resolve() != skip.resolve()
    ]
    return shutil.which(program, path=os.pathsep.join(dirs))


def write_wrappers(
    products: list[str], directory: str, *, force: bool = False, path: str | None = None
) -> list[dict[str, str]]:
    """Write one wrapper per product into ``directory``; returns what was written."""
    d = Path(directory).expanduser()
    d.mkdir(parents=True, exist_ok=True)
    tenantry = [sys.executable, "-m", "tenantry"]
    out = []
    for product in products:
        program = PROGRAMS.get(product)
        if program is None:
            continue
        real = find_real(program, d, path)
        if real is None:
            out.append({"agent": product, "skipped": f"{program} is not on PATH"})
            continue
        target = d / program
        if target.exists() and MARKER not in target.read_text(errors="replace") and not force:
            raise UsageError(
                f"{target} exists and is not a Tenantry wrapper", hint="remove it or pass --yes"
            )
        target.write_text(render(product, real, tenantry))
        target.chmod(0o755)
        out.append({"agent": product, "wrapper": str(target), "real": real})
    return out
