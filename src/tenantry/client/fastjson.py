"""JSON for the client path, on CPython's C codec without the ``json`` package.

``import json`` costs a cold ``tenantry run`` about as much as the rest of
its Python (the package imports ``re`` and ``enum``, compiles its patterns,
and builds encoder and decoder classes). The actual work is done by the C
module ``_json`` under it, which imports nothing. ``dumps`` and ``loads``
drive that module directly with ``json.dumps``' and ``json.loads``' default
settings, so the text is the same (``tests/core/test_fastjson.py`` compares
them on many values). Errors are ``ValueError`` (bad JSON) and ``TypeError``
(a value JSON cannot hold), as with ``json``. Where ``_json`` is missing (not
CPython) the ``json`` package does the work.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the client path avoids importing typing
if TYPE_CHECKING:
    from typing import Any

try:
    import _json
except ImportError:  # pragma: no cover - CPython always has it
    _json = None  # type: ignore[assignment]

_WS = " \t\n\r"


def _unencodable(obj: object) -> object:
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


class _Context:
    """What the C scanner reads from ``json.JSONDecoder``, with its defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int

    @staticmethod
    def parse_constant(name: str) -> float:
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}[name]


if _json is not None:
    _encode = _json.make_encoder(
        None, _unencodable, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True
    )
    _context: Any = _Context()  # what the C scanner reads: attributes, not a type
    _scan = _json.make_scanner(_context)


def dumps(obj: Any) -> str:
    """``json.dumps(obj)``: ASCII, ``", "`` and ``": "`` separators."""
    if _json is None:  # pragma: no cover
        import json

        return json.dumps(obj)
    if isinstance(obj, str):  # the C encoder takes containers and scalars other than str
        return _json.encode_basestring_ascii(obj)
    return "".join(_encode(obj, 0))


def loads(data: str | bytes) -> Any:
    """``json.loads(data)`` for UTF-8 ``bytes`` or ``str``; ``ValueError`` when it is not JSON."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    if _json is None:  # pragma: no cover
        import json

        return json.loads(text)
    start = len(text) - len(text.lstrip(_WS))
    try:
        obj, end = _scan(text, start)
    except StopIteration as exc:
        raise ValueError(f"not JSON at character {exc.value}") from None
    if text[end:].strip(_WS):
        raise ValueError(f"extra data after the JSON value at character {end}")
    return obj
