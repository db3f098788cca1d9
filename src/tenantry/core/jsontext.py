"""JSON text that must hold one object: parsed, or refused with a usage error that says what."""

from __future__ import annotations

import json
from typing import Any

from tenantry.core.errors import UsageError


def json_object(text: str | bytes, what: str, *, hint: str = "") -> dict[str, Any]:
    """Parse ``text`` (``what`` names it in the error) and require a JSON object.

    Empty text is an empty object. Errors are :class:`UsageError`: the caller sent or
    pointed at something that is not one JSON object.
    """
    try:
        data = json.loads(text or "{}")
    except ValueError as exc:
        raise UsageError(f"{what} is not valid JSON ({exc})", hint=hint) from exc
    if not isinstance(data, dict):
        raise UsageError(f"{what} must be a JSON object", hint=hint)
    return data
