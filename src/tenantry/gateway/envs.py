"""Environments sent once per session: later requests name them by digest.

A client forwards its environment with a command (``env``: PATH, module
systems' variables, ...), a few KiB that rarely change within a session. The
daemon keeps each environment it received, per principal, under its digest
(``env_digest``: ``tenantry.client.wire.env_digest``); a request that carries
``env_digest`` instead of ``env`` gets the stored one back before the gates
see it, so policy, placement and the command see the same environment either
way. An unknown digest (another principal's, or a daemon restarted since) is
``EnvUnknown``: the client sends the environment itself again. Bounded: the
least recently used environments go first.

``env_digest = "latest"`` (``ENV_LATEST``) names the environment this principal
sent most recently: the daemon's hook submits an agent's ``sbatch`` with it
(``agents.hook``), having no environment of its own to send.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from tenantry.client.wire import ENV_DIGEST, ENV_LATEST, env_digest
from tenantry.core.errors import EnvUnknown, UsageError
from tenantry.core.models import Principal

MAX_ENVS = 1024

__all__ = ["ENV_DIGEST", "ENV_LATEST", "SessionEnvs"]


class SessionEnvs:
    def __init__(self, limit: int = MAX_ENVS) -> None:
        self.limit = limit
        self._envs: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._latest: dict[str, str] = {}  # principal key -> digest of its last environment

    def __len__(self) -> int:
        return len(self._envs)

    def remember(self, p: Principal, env: dict[str, Any]) -> None:
        """Keep an environment ``p`` sent (checked at the edge already)."""
        key = (p.key, env_digest(env))
        self._latest[p.key] = key[1]
        if key in self._envs:
            self._envs.move_to_end(key)
            return
        self._envs[key] = env
        while len(self._envs) > self.limit:
            (gone, digest), _ = self._envs.popitem(last=False)
            if self._latest.get(gone) == digest:
                del self._latest[gone]

    def expand(self, p: Principal, params: dict[str, Any]) -> dict[str, Any]:
        """``params`` with ``env_digest`` replaced by the environment ``p`` sent before."""
        digest = params.get(ENV_DIGEST)
        if not isinstance(digest, str) or "env" in params:
            raise UsageError(f"send either 'env' or a string {ENV_DIGEST!r}, not both")
        if digest == ENV_LATEST:
            digest = self._latest.get(p.key, "")
        env = self._envs.get((p.key, digest))
        if env is None:
            raise EnvUnknown(
                "this daemon does not hold the environment named by env_digest",
                hint="send the environment itself ('env'); the Tenantry clients do this",
            )
        self._envs.move_to_end((p.key, digest))
        self._latest[p.key] = digest
        out = {k: v for k, v in params.items() if k != ENV_DIGEST}
        out["env"] = env
        return out
