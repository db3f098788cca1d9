"""The daemon's wire format, one codec for every client (standard library only).

Placeholder for the client's codec; ``env_digest`` names an environment sent
once per session.
"""

from __future__ import annotations

import hashlib
import json

ENV_DIGEST = "env_digest"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def env_digest(env: Mapping[str, object]) -> str:
    """The digest a request sends instead of an environment the daemon already holds."""
    raw = json.dumps(dict(env), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(raw.encode()).hexdigest()
