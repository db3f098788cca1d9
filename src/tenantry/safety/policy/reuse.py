"""Which policy answers another process may keep, and how it checks one still holds.

An agent's hook asks ``policy.check`` before every shell command; in facility
mode the executor forwards it to the facility service. Most of those commands
(``ls``, ``head``) are asked again and again in the same words, and the
service's answer is a function of the request, the policy's ``version`` (its
loads and facts), the clock hour, and what normalizing looked at
(``observed``). ``describe`` says, next to an answer, whether it may be kept and
on what it rests:

- only an **allow** of a well-formed request (a kept denial could only be
  wrong towards allowing nothing; a kept allow must be exactly the service's);
- every look is either fixed for the service's life (its placement of the
  command: ``static``) or a file-system look the keeper makes again itself
  (``PORTABLE``: ``realpath``, ``islink`` of a path); any other look (a job's
  owner, a script's text, ``PATH``) makes the answer not reusable;
- it holds until the end of the service's clock hour (the hour is part of
  what the policy sees) and while the policy's version is unchanged.

``holds(looks)`` makes the portable looks again: a changed symlink misses.
The looks are made as the keeper's user, not as the service's account; both
see the same names, except under a directory the keeper cannot search, where
the keeper's command could not go either.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from typing import Any

from tenantry.safety.policy.judge import Decision

PORTABLE: dict[str, Callable[[str], Any]] = {
    "realpath": os.path.realpath,
    "islink": os.path.islink,
}
_NAMES = {fn: name for name, fn in PORTABLE.items()}
MAX_LOOKS = 64


def hour_end(now: float | None = None) -> float:
    """The epoch time at which the local clock hour of ``now`` ends."""
    t = time.time() if now is None else now
    lt = time.localtime(t)
    return t - (t % 1.0) - lt.tm_min * 60 - lt.tm_sec + 3600.0


def describe(
    decision: Decision, version: str, *, static: Iterable[Callable[..., Any]] = ()
) -> dict[str, Any] | None:
    """``{"version", "until", "looks"}`` when ``decision`` may be kept, else None."""
    if not decision.allowed or decision.error is not None or decision.warnings:
        return None
    fixed = list(static)
    looks: list[list[Any]] = []
    for fn, args, result in decision.looks:
        if any(fn == f for f in fixed):
            continue
        name = _NAMES.get(fn)
        ok = isinstance(result, str | bool) and len(args) == 1 and isinstance(args[0], str)
        if name is None or not ok:
            return None
        looks.append([name, args[0], result])
    if len(looks) > MAX_LOOKS:
        return None
    return {"version": version, "until": hour_end(), "looks": looks}


def holds(looks: Any) -> bool:
    """Does every portable look give the same result here and now?"""
    if not isinstance(looks, list):
        return False
    for item in looks:
        if not isinstance(item, list) or len(item) != 3:
            return False
        name, arg, was = item
        fn = PORTABLE.get(name) if isinstance(name, str) else None
        if fn is None or not isinstance(arg, str):
            return False
        try:
            now = fn(arg)
        except (OSError, ValueError):
            return False
        if now != was or type(now) is not type(was):
            return False
    return True
