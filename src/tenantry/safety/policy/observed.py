"""What a decision depended on besides the request: observed, so a cached one can be re-checked.

Normalizing a request is pure except for a few looks at the world: symlinks
resolved, scripts read, ``PATH`` searched, the daemon's placement and job
owners asked. Each of those goes through ``look(fn, *args)``, which records
``(fn, args, result)`` while a decision is being built. A decision cached on
the raw request (``judge.Judge``) is reused only when every recorded look
still gives the same result (``unchanged``): a changed symlink, script or
placement misses the cache and the request is normalized again.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

Look = tuple[Callable[..., Any], tuple[Any, ...], Any]
_RAISED = object()  # a look that raised: the exception type is kept next to it

_current: ContextVar[list[Look] | None] = ContextVar("tenantry_policy_looks", default=None)


def look(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, recorded when a decision is being built."""
    seen = _current.get()
    try:
        out = fn(*args)
    except Exception as exc:
        if seen is not None:
            seen.append((fn, args, (_RAISED, type(exc))))
        raise
    if seen is not None:
        seen.append((fn, args, out))
    return out


def recording() -> tuple[list[Look], Callable[[], None]]:
    """Start recording looks; returns the list and a function that stops."""
    seen: list[Look] = []
    token = _current.set(seen)
    return seen, lambda: _current.reset(token)


def unchanged(looks: list[Look]) -> bool:
    """Does every recorded look give the same result now?"""
    for fn, args, was in looks:
        try:
            now = fn(*args)
        except Exception as exc:
            now = (_RAISED, type(exc))
        if now != was:
            return False
    return True
