"""Who calls the facility service: the uid proven by the connection, staff by Unix group.

- ``PeerCredAuthenticator``: the peer's uid/gid/pid from ``SO_PEERCRED`` on the
  service's Unix socket (read once per connection by ``gateway.peercred``).
- ``staff_members``: the users of the staff group (its member list and the
  users whose primary group it is). Staff are never a claim.
- ``FacilityIdentity``: the ``PrincipalResolver`` of the service. The uid (and
  so the user name) comes from the first authenticator that applies; the rest
  of the principal (agent product, session, host, project, origin, tier) is
  what the caller says. A user's executor forwards what it verified (a
  sandboxed session is ``origin="sandboxed"``); a caller can only describe
  principals of its own uid, so a claim never reaches another user's state.
"""

from __future__ import annotations

import grp
import os
import pwd
import time
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from tenantry.core.errors import PermissionDenied, UsageError
from tenantry.core.jsontext import json_object
from tenantry.core.models import AgentProduct, Principal
from tenantry.facility.seams import CLAIMS, Authenticator, Peer, Viewer

PEER_KEY = "tenantry.peer"  # as gateway.peercred sets it (a surface this layer cannot import)
CLAIM_MAX = 200
ORIGINS = frozenset({"user", "claimed", "sandboxed"})


class PeerCredAuthenticator:
    """The Unix socket's ``SO_PEERCRED``: the kernel's word for the caller's uid."""

    async def authenticate(self, scope: MutableMapping[str, Any]) -> Peer | None:
        cred = scope.get(PEER_KEY)
        if cred is None:
            return None
        pid, uid, gid = cred
        return Peer(uid=int(uid), gid=int(gid), pid=int(pid), via="peercred")


NAME_TTL_S = 60.0  # a uid's name is looked up again after this long (a user renamed, removed)
_names: dict[int, tuple[str, float]] = {}


def user_name(uid: int) -> str:
    """The name of ``uid``, from NSS at most once a minute per uid.

    Every request to the service needs its caller's name; at a site whose
    accounts come from LDAP through sssd or nslcd each lookup can cost a round
    trip. A uid NSS does not know is not kept (it is asked again next time).
    """
    now = time.monotonic()
    hit = _names.get(uid)
    if hit is not None and hit[1] > now:
        return hit[0]
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        _names.pop(uid, None)
        return str(uid)
    if len(_names) >= 4096:
        _names.clear()
    _names[uid] = (name, now + NAME_TTL_S)
    return name


def staff_members(group: str) -> frozenset[str]:
    """Users of the Unix group ``group`` (members and primary members); empty if none."""
    if not group:
        return frozenset()
    try:
        entry = grp.getgrnam(group)
    except KeyError:
        return frozenset()
    primary = {p.pw_name for p in pwd.getpwall() if p.pw_gid == entry.gr_gid}
    return frozenset(entry.gr_mem) | primary


def parse_claims(raw: str) -> dict[str, str]:
    data = json_object(raw, "the principal header")
    out: dict[str, str] = {}
    for key in CLAIMS:
        value = data.get(key, "")
        if not isinstance(value, str) or len(value) > CLAIM_MAX or "\n" in value:
            raise UsageError(f"principal field {key!r} must be one line of <= {CLAIM_MAX} chars")
        out[key] = value
    return out


class FacilityIdentity:
    """The facility service's callers: proven uid, claimed description, staff by group."""

    def __init__(self, authenticators: Sequence[Authenticator], staff: frozenset[str]) -> None:
        self.authenticators = list(authenticators)
        self.staff = staff

    async def peer(self, scope: MutableMapping[str, Any]) -> Peer:
        for auth in self.authenticators:
            peer = await auth.authenticate(scope)
            if peer is not None:
                return peer
        raise PermissionDenied(
            "the caller's identity cannot be proven on this connection",
            hint="connect through the facility's Unix socket (or its MUNGE-authenticated port)",
        )

    async def principal(self, scope: MutableMapping[str, Any], raw_claims: str) -> Principal:
        return self.describe(await self.peer(scope), parse_claims(raw_claims))

    def describe(self, peer: Peer, claims: Mapping[str, str]) -> Principal:
        """The principal of a proven peer, as it describes itself (within its own uid)."""
        try:
            agent = AgentProduct(claims.get("agent") or "human")
        except ValueError:
            agent = AgentProduct.OTHER_AGENT
        origin = claims.get("origin", "")
        if origin not in ORIGINS:
            origin = "claimed" if agent.is_agent else "user"
        if agent.is_agent and origin == "user":
            origin = "claimed"  # an agent is never a human's principal
        return Principal(
            uid=peer.uid,
            user=user_name(peer.uid),
            agent=agent,
            session=claims.get("session", ""),
            host=claims.get("host") or peer.host,
            project=claims.get("project", ""),
            origin=origin,
            tier=claims.get("tier", ""),
        )

    def sees_everyone(self, p: Principal) -> bool:
        """Staff as humans, and the service's own account (its dashboard token's holder)."""
        return self.viewer(p).is_staff or (not p.is_agent and p.uid == os.getuid())

    def viewer(self, p: Principal) -> Viewer:
        """Staff only as humans: an agent of a staff member sees what its user's agents may."""
        return Viewer(uid=p.uid, user=p.user, is_staff=not p.is_agent and p.user in self.staff)
