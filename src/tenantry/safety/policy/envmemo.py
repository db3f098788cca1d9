"""The JSON of a command's environment, serialized once per environment.

Every ``commands.run`` carries the client's environment (a few KiB), and the
daemon hands the same dict to every request of a session (``gateway.envs``
holds it by digest). The judge's decision cache keys on the request's JSON,
so each request serialized the whole environment and hashed the new text.
``EnvJson`` keeps the text per environment object (the same string, its hash
computed once) and reuses it while that object still equals a copy taken with
the text, so a changed environment is serialized again: the text is always
that of the environment as it is now.
"""

from __future__ import annotations

import json
from typing import Any

SIZE = 64  # environments kept (one per live session is plenty)


class EnvJson:
    def __init__(self, **dumps: Any) -> None:
        self._dumps = dumps  # json.dumps options
        self._memo: dict[int, tuple[dict[str, Any], dict[str, Any], str]] = {}

    def __call__(self, env: dict[str, Any]) -> str:
        hit = self._memo.get(id(env))
        if hit is not None and hit[0] is env and hit[1] == env:
            return hit[2]
        text = json.dumps(env, **self._dumps)
        # a copy compares equal only while every value is the same text: keep
        # plain string environments only (a list value could change inside)
        if all(type(v) is str for v in env.values()):
            if len(self._memo) >= SIZE:
                self._memo.clear()
            self._memo[id(env)] = (env, dict(env), text)
        return text
