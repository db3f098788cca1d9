"""Who is calling: the principal of a request, from the socket it arrived on.

- The uid is the peer's (``SO_PEERCRED``), never the client's word.
- On a *session socket* (one per ``tenantry agent`` sandbox) the agent product,
  session id and project are the registration's. Whatever the request claims
  in ``X-Tenantry-Principal`` is ignored and recorded as a claim.
- On the user's own socket, a caller whose process lives in a registered
  sandbox's PID namespace is that session too (it can only have got there
  through a hole in the profile, and it still cannot claim to be anyone else).
- Any other caller on the user's socket says what it is: an agent by its own
  word is a *claimed* session (``origin="claimed"``) and gets the agent rules,
  or is refused when the facility sets ``claimed_agents = "refuse"``.
"""

from __future__ import annotations

import functools
import os
import pwd
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from tenantry.core.errors import PermissionDenied, UsageError
from tenantry.core.events import Event, EventType
from tenantry.core.jsontext import json_object
from tenantry.core.models import AgentProduct, Principal
from tenantry.gateway import edge
from tenantry.gateway.peercred import PEER_KEY, SOCKET_KEY
from tenantry.service.runtime import Runtime

CLAIM_MAX = 200
_HOST = os.uname().nodename


def parse_claims(raw: str) -> dict[str, str]:
    data = json_object(raw, "the principal header")
    out: dict[str, str] = {}
    for key in ("agent", "session", "host", "project"):
        value = data.get(key, "")
        if not isinstance(value, str) or len(value) > CLAIM_MAX:
            raise UsageError(f"principal field {key!r} must be a string of <= {CLAIM_MAX} chars")
        edge.check_text(value, f"principal field {key!r}", strict="path")
        out[key] = value
    return out


@functools.lru_cache(maxsize=256)
def _user(uid: int) -> str:
    """The user name of ``uid`` (looked up once per uid: NSS lookups cost ~100 us)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@functools.lru_cache(maxsize=16)
def _normal(path: str) -> str:
    """``path`` as ``pathlib`` spells it (the daemon's socket, asked on every request)."""
    return str(Path(path))


def own_peer(scope: MutableMapping[str, Any]) -> tuple[int, int, int]:
    """The caller's (pid, uid, gid) from the socket, refused unless it is this daemon's uid."""
    peer = scope.get(PEER_KEY)
    if peer is None:
        raise PermissionDenied("the caller's identity cannot be read from this connection")
    pid, uid, gid = peer
    if uid != os.getuid():
        raise PermissionDenied(
            f"this daemon serves uid {os.getuid()} only (user mode); you are uid {uid}",
            hint="use your own daemon: unset TENANTRY_SOCKET or point it at your own socket",
        )
    return int(pid), int(uid), int(gid)


async def resolve(rt: Runtime, scope: MutableMapping[str, Any], raw_claims: str) -> Principal:
    pid, uid, _gid = own_peer(scope)
    claims = parse_claims(raw_claims)
    from tenantry.safety.sandbox.registry import SandboxRegistry

    registry = rt.components.get("sandbox")
    if isinstance(registry, SandboxRegistry):
        where = str(scope.get(SOCKET_KEY) or "")
        session = registry.by_socket(where) if where else None
        if session is None and where and where != _normal(rt.settings.socket):
            # a session socket whose session is gone: never fall back to claims
            raise PermissionDenied("this agent session has ended; its socket accepts nothing")
        if session is None:
            session = registry.by_pidns(pid)
        if session is not None:
            if session.state == "ended":
                raise PermissionDenied(f"agent session {session.id} has ended")
            p = session.principal(_HOST)
            if registry.note_claims(session, claims):
                await rt.emit(
                    Event(
                        EventType.SESSION_CLAIM_IGNORED,
                        p.key,
                        session.id,
                        "ignored",
                        data={"claimed": {k: claims[k] for k in ("agent", "session", "project")}},
                    )
                )
            return p
    try:
        agent = AgentProduct(claims["agent"] or "human")
    except ValueError:
        agent = AgentProduct.OTHER_AGENT
    origin = "claimed" if agent.is_agent else "user"
    if origin == "claimed" and rt.settings.claimed_agents == "refuse":
        raise PermissionDenied(
            "this facility accepts agents only in sandboxed sessions; this client says it is"
            f" {agent.value} but runs outside any sandbox",
            hint="start the agent with `tenantry agent -- <agent command>`",
            rule="claimed-agents",
        )
    return Principal(
        uid=uid,
        user=_user(uid),
        agent=agent,
        session=claims["session"],
        host=claims["host"],
        project=claims["project"],
        origin=origin,
    )
