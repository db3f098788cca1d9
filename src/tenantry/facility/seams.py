"""The seams of facility mode: small Protocols other modules plug into.

Facility mode has two sides. The *facility service* (``tenantry facility
serve``, a system account) owns what governs agents; each user's daemon is the
user's *executor* and asks the service for every decision. Four seams join
the parts, so a replacement (a MUNGE listener, a cluster-wide poller) plugs in
without the concepts knowing which mode they run in:

- ``Authenticator``: turns a connection into a proven ``Peer`` (uid, pid,
  host). ``identity.PeerCredAuthenticator`` reads ``SO_PEERCRED`` on the Unix
  socket; a TCP listener authenticated by MUNGE credentials is another.
  ``identity.FacilityIdentity`` tries its authenticators in order and builds
  the ``Principal`` (the uid from the peer, never from the request).
- ``JobStatusSource``: job status with per-user visibility (a viewer sees their
  own jobs; staff see all). ``jobview.EventJobView`` builds it from the job
  events executors send; a poller of the scheduler for the whole cluster is
  another.
- ``SchedulerStatus``: job states by backend id from one poller of the
  scheduler for the whole cluster; when the service has one, executors take
  their jobs' states from it instead of polling the scheduler themselves.
- ``FacilityChannel``: how an executor reaches the service (``link``: the
  Unix socket; a MUNGE-authenticated TCP channel for other login nodes), a
  small base class: a channel sends one ``FacilityRequest``.
- ``PrincipalResolver`` and ``OpForwarder`` (in ``tenantry.service.seams``,
  because they are typed slots of the ``Runtime``): the service fills
  ``rt.identify``; the executor fills ``rt.forwarder``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from tenantry.backends.base import JobUpdate
from tenantry.core import errors
from tenantry.core.models import Principal
from tenantry.service.seams import OpForwarder, PrincipalResolver

__all__ = [
    "CLAIMS",
    "Authenticator",
    "FacilityChannel",
    "FacilityRequest",
    "JobStatusSource",
    "OpForwarder",
    "Peer",
    "PrincipalResolver",
    "SchedulerStatus",
    "Viewer",
]


# What a caller says of itself beside what its connection proves (uid, and so the
# user): a Principal's wire fields but those two. Executors send them, the service checks them.
CLAIMS = ("agent", "session", "host", "project", "origin", "tier")


@dataclass(frozen=True, slots=True)
class Peer:
    """Who is at the other end of a connection, as the connection proves it."""

    uid: int
    gid: int
    pid: int | None = None  # None when the transport cannot tell (TCP)
    host: str = ""  # the peer's host when it is not this one
    via: str = "peercred"  # how it was proven: peercred | munge | ...


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who asks for status: a user, and whether they are staff (who see everyone)."""

    uid: int
    user: str
    is_staff: bool = False

    def may_see(self, owner_user: str) -> bool:
        return self.is_staff or owner_user == self.user


class Authenticator(Protocol):
    """Proves who is at the other end of one connection.

    ``scope`` is the ASGI scope of a request on that connection (its
    ``tenantry.peer`` entry holds ``SO_PEERCRED`` on a Unix socket; its
    headers carry any credential a TCP client sent). Return ``None`` when this
    authenticator does not apply to the connection (another may); raise
    ``PermissionDenied`` when it applies and the credential is bad.
    """

    async def authenticate(self, scope: MutableMapping[str, Any]) -> Peer | None: ...


class JobStatusSource(Protocol):
    """Job status for many users, each seeing only what they may.

    Job views are dicts as ``jobs.status`` returns them, plus ``user`` (the
    owner) and ``key`` (``user:job_id``, unique across users). ``job_id`` is
    the owner's job id (``t12``) or a ``user:job_id`` key.
    """

    async def status_of(self, job_id: str, viewer: Viewer, owner: str = "") -> dict[str, Any]:
        """One job's view; ``NotFound`` when it does not exist *or* the viewer may not see it."""
        ...

    async def jobs_of(self, viewer: Viewer, *, active: bool = False) -> list[dict[str, Any]]:
        """Every job the viewer may see (staff: all users'), newest first."""
        ...

    async def wait_change(
        self, job_id: str, viewer: Viewer, state: str, timeout_s: float, owner: str = ""
    ) -> dict[str, Any]:
        """The job's view once its state differs from ``state`` (or at the timeout)."""
        ...


class SchedulerStatus(Protocol):
    """What the scheduler says of jobs, by backend id, as one cluster-wide poller sees it.

    The facility service answers ``facility.scheduler_status`` from it; an
    executor's poller then takes the states of its user's jobs from the
    service instead of asking the scheduler itself (``status.FacilityStatusBackend``).
    Only the viewer's own jobs are returned (staff: any); ids the source does not
    know are omitted, and the executor asks its own backend for those.
    """

    async def query(self, backend_ids: Sequence[str], viewer: Viewer) -> dict[str, JobUpdate]: ...


@dataclass(frozen=True, slots=True)
class FacilityRequest:
    """One op for one principal, as a channel carries it to the service."""

    principal: Principal
    op: str
    params: dict[str, Any]
    request_id: str  # "" when the caller has none
    timeout_s: float  # how long this call may wait for its answer


class FacilityChannel(ABC):
    """How an executor reaches the service: one op for one principal, the service's answer.

    ``link.FacilityLink`` speaks HTTP over the service's Unix socket (same host).
    An executor on another login node uses a channel that proves its uid with
    MUNGE over TCP; such a channel is registered for its address scheme in
    ``link.CHANNELS`` (``facility_address = "munge://login1:7070"``). A service
    that cannot be reached raises ``FacilityUnavailable``; its refusals come back
    as the ``TenantryError`` they were. A channel implements ``send`` and
    ``aclose``; ``call`` is the same for all.
    """

    down_hint: ClassVar[str] = "retry in a moment; your own commands keep working"

    def __init__(self, address: str, timeout_s: float) -> None:
        self.address = address
        self.timeout_s = timeout_s

    async def call(
        self,
        p: Principal,
        op: str,
        params: dict[str, Any],
        *,
        request_id: str = "",
        timeout_s: float | None = None,
    ) -> tuple[Any, list[str]]:
        """The service's answer to ``op`` for ``p``: its result and its warnings."""
        req = FacilityRequest(p, op, params, request_id, timeout_s or self.timeout_s)
        return await self.send(req)

    @abstractmethod
    async def send(self, req: FacilityRequest) -> tuple[Any, list[str]]: ...

    @abstractmethod
    async def aclose(self) -> None: ...

    def _down(self, why: str) -> errors.FacilityUnavailable:
        """The error for a service this channel cannot reach (``why``: what happened)."""
        return errors.FacilityUnavailable(
            f"the facility service at {self.address} cannot be reached ({why}); agent actions"
            " are refused until it answers",
            hint=self.down_hint,
        )
