"""Job state changes pushed from the facility service to its executors.

The service side, :func:`changes_for`, answers ``facility.job_changes``: the
changes of the caller's own jobs with a sequence number after ``since``, as
soon as there is one (a long poll held open up to ``timeout_s``). It reads
the status cache of the cluster's one poller (``StatusCache.recent``, in seq
order); a ``since`` the cache cannot continue from (0 or less, older than its
recent changes, or ahead of it after the service restarted) is answered with
the current status of every job of the user instead (``reset``).

The executor side, :class:`StatusPush`, holds that subscription open over the
executor's link to the service (its Unix socket or the ``munge://`` TCP link),
resumes it from the last seq it took after a reconnect, so no change is
missed, and keeps the last pushed state of each job. ``FacilityStatusBackend``
answers the daemon's status poller from it and wakes the poller on each
change (``notify``), so waiters and the status cache move when the service
sees a change, with no request of their own.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Callable
from typing import Any, Protocol

from tenantry.backends.base import JobUpdate
from tenantry.core.errors import TenantryError
from tenantry.core.models import JobState, Principal
from tenantry.facility.poller import JobStatus
from tenantry.facility.seams import FacilityChannel

__all__ = ["ChangeLog", "StatusPush", "changes_for"]

log = logging.getLogger(__name__)

OP = "facility.job_changes"
MAX_CHANGES = 1_000  # per answer; ``more`` says the executor should ask again at once
WAIT_S = 30.0  # how long the service holds one long poll open
KEEP = 10_000  # pushed states an executor keeps (the oldest go first)
PAUSE_MAX_S = 5.0
NO_PUSH_RETRY_S = 60.0  # a service with no poller to push from: ask again this often


class ChangeLog(Protocol):
    """What the service reads (``poller.StatusCache``)."""

    seq: int

    @property
    def recent(self) -> collections.deque[JobStatus]: ...

    def current_of(self, user: str) -> list[JobStatus]: ...

    async def wait_seq(self, since: int, timeout_s: float) -> int: ...


def _wire(st: JobStatus) -> dict[str, Any]:
    code = st.exit_code if st.state.terminal else None
    return {"backend_id": st.job_id, "state": st.state.value, "exit_code": code,
            "reason": st.reason, "seq": st.seq}  # fmt: skip


def _after(log_: ChangeLog, user: str, since: int) -> list[JobStatus] | None:
    """The user's changes after ``since`` from the recent log; None if it cannot tell."""
    recent = log_.recent
    if since <= 0 or since > log_.seq or (recent and recent[0].seq > since + 1):
        return None
    out: list[JobStatus] = []
    for st in reversed(recent):
        if st.seq <= since:
            break
        if st.user == user:
            out.append(st)
    out.reverse()
    return out


async def changes_for(
    log_: ChangeLog,
    user: str,
    since: int,
    timeout_s: float = WAIT_S,
    *,
    stream: str = "",
    their_stream: str = "",
) -> dict[str, Any]:
    """``user``'s job changes after ``since`` (waiting up to ``timeout_s`` for one).

    ``stream`` names the sequence ``since`` counts in (a service's own counter starts
    again when it restarts; the replicas' shared log does not): a caller whose
    ``their_stream`` differs gets a reset.
    """
    found = _after(log_, user, since) if their_stream == stream else None
    if found is not None and not found:
        seen = since
        while not found and timeout_s > 0:
            loop = asyncio.get_running_loop()
            start = loop.time()
            seen = await log_.wait_seq(seen, timeout_s)
            timeout_s -= loop.time() - start
            found = _after(log_, user, since)
            if found is None:
                break
    if found is None:  # a reset: the newest status of each job of the user
        rows, more, seq = log_.current_of(user)[-MAX_CHANGES:], False, log_.seq
    else:
        more = len(found) > MAX_CHANGES
        rows = found[:MAX_CHANGES]
        seq = rows[-1].seq if more else log_.seq
    return {"push": True, "stream": stream, "seq": seq, "reset": found is None,
            "more": more, "changes": [_wire(r) for r in rows]}  # fmt: skip


class StatusPush:
    """The executor's subscription to its jobs' changes; lifecycle: ``run`` (supervised)."""

    def __init__(
        self,
        link: FacilityChannel,
        me: Principal,
        *,
        wait_s: float = WAIT_S,
        on_change: Callable[[], None] | None = None,
    ) -> None:
        self.link = link
        self.me = me
        self.wait_s = wait_s
        self.on_change = on_change
        self.states: collections.OrderedDict[str, JobUpdate] = collections.OrderedDict()
        self.seq = 0
        self.stream = ""
        self.live = False  # subscribed: states are current up to ``seq``
        self.calls = 0
        self.changes = 0
        self.resets = 0
        self.reconnects = 0

    def state_of(self, backend_id: str) -> JobUpdate | None:
        return self.states.get(backend_id) if self.live else None

    def take(self, result: dict[str, Any]) -> int:
        """Absorb one answer of ``facility.job_changes``; returns how many states changed."""
        if result.get("reset"):
            self.resets += 1
        n = 0
        for raw in result.get("changes") or ():
            if not isinstance(raw, dict):
                continue
            bid = str(raw.get("backend_id", ""))
            code = raw.get("exit_code")
            try:
                state = JobState(str(raw.get("state")))
            except ValueError:
                continue
            upd = JobUpdate(bid, state, exit_code=code if isinstance(code, int) else None,
                            reason=str(raw.get("reason", "")))  # fmt: skip
            self.states[bid] = upd
            self.states.move_to_end(bid)
            n += 1
        while len(self.states) > KEEP:
            self.states.popitem(last=False)
        self.seq = int(result.get("seq") or self.seq)
        self.stream = str(result.get("stream", ""))
        self.changes += n
        return n

    async def run(self) -> None:
        pause = 0.2
        while True:
            self.calls += 1
            try:
                result, _ = await self.link.call(
                    self.me,
                    OP,
                    {"since": self.seq, "stream": self.stream, "timeout_s": self.wait_s},
                    timeout_s=self.wait_s + self.link.timeout_s,
                )
            except TenantryError as err:
                if self.live:
                    self.reconnects += 1
                    log.info("facility push lost (%s); the status poller asks meanwhile", err)
                self.live = False  # the daemon's own poll answers meanwhile
                await asyncio.sleep(pause)
                pause = min(pause * 2, PAUSE_MAX_S)
                continue
            pause = 0.2
            if not isinstance(result, dict) or not result.get("push"):
                self.live = False  # a service without a poller: nothing is pushed
                await asyncio.sleep(NO_PUSH_RETRY_S)
                continue
            changed = self.take(result)
            self.live = True
            if changed and self.on_change is not None:
                self.on_change()

    def health(self) -> dict[str, Any]:
        return {"live": self.live, "seq": self.seq, "calls": self.calls,
                "changes": self.changes, "resets": self.resets,
                "reconnects": self.reconnects}  # fmt: skip
