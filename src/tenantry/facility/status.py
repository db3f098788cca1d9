"""The executor takes its jobs' states from the facility (one poller per cluster).

``FacilityStatusBackend`` wraps the user's own backend: submitting and
cancelling still run as the user (``sbatch``/``scancel`` with the user's
credentials), but ``query`` asks the service (``facility.scheduler_status``),
which answers from its ``SchedulerStatus`` source. Jobs the service does not
know (or a service without a poller, or one that cannot be reached) are asked
of the user's own backend, so status never depends on the service being up.
With ``facility_push`` the service pushes the states instead
(``push.StatusPush``): ``query`` answers the jobs it has pushed states of
without a request, and each pushed change wakes the daemon's status poller
(``notify``); a job this executor submitted a moment ago, of which nothing was
pushed yet, is PENDING, as ``sbatch`` said, for up to ``FRESH_S``: the push
brings its start (the facility learns it from its poller or from slurmctld's
job events), so neither the service nor the controller is asked for it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from tenantry.backends.base import Backend, JobUpdate, Recoverable, Submitted
from tenantry.core.errors import TenantryError
from tenantry.core.models import JobSpec, JobState, Principal
from tenantry.core.settings import Settings
from tenantry.core.tasks import TaskGroup
from tenantry.facility.identity import user_name
from tenantry.facility.link import open_channel
from tenantry.facility.push import StatusPush
from tenantry.facility.seams import FacilityChannel

INFO_TTL_S = 300.0  # partitions and nodes from the facility: asked once per this long
FRESH_S = 120.0  # a new job is PENDING from sbatch's word this long, while nothing is pushed
FRESH_REASON = "submitted; its start is pushed by the facility"


def update_to_wire(u: JobUpdate) -> dict[str, Any]:
    out = {"backend_id": u.backend_id, "state": u.state.value, "exit_code": u.exit_code,
           "started_at": u.started_at, "ended_at": u.ended_at, "reason": u.reason}  # fmt: skip
    if isinstance(u.extra.get("staleness_s"), int | float):
        out["staleness_s"] = u.extra["staleness_s"]  # the cluster poller's age of this state
    return out


def update_from_wire(d: dict[str, Any]) -> JobUpdate:
    code = d.get("exit_code")
    started, ended = d.get("started_at"), d.get("ended_at")
    return JobUpdate(
        backend_id=str(d["backend_id"]),
        state=JobState(str(d["state"])),
        exit_code=int(code) if isinstance(code, int) else None,
        started_at=float(started) if isinstance(started, int | float) else None,
        ended_at=float(ended) if isinstance(ended, int | float) else None,
        reason=str(d.get("reason", "")),
    )


class FacilityStatusBackend:
    def __init__(
        self,
        inner: Backend,
        link: FacilityChannel,
        *,
        push: bool = False,
        settings: Settings | None = None,
    ) -> None:
        self.inner = inner
        self.settings = settings  # the user's own defaults (partition, account)
        self._info: tuple[float, dict[str, Any]] | None = None
        self.link = link
        self.name = inner.name
        self.me = Principal(uid=os.getuid(), user=user_name(os.getuid()))
        self.from_facility = 0  # how many states came from the service (for info/tests)
        self.asked = 0  # how many ``facility.scheduler_status`` requests this executor sent
        # the daemon's status poller sets this; a pushed change wakes it at once
        self.notify: Callable[[], None] | None = None
        self.push = StatusPush(link, self.me, on_change=self._changed) if push else None
        self._tasks = TaskGroup("facility-push")
        self._fresh: dict[str, float] = {}  # backend id -> when this executor submitted it
        self.fresh_answers = 0  # states answered from sbatch's word (for info/tests)

    def _changed(self) -> None:
        if self.notify is not None:
            self.notify()

    async def start(self) -> None:
        await self.inner.start()
        if self.push is not None:
            self._tasks.supervise("facility-push", self.push.run)

    async def aclose(self) -> None:
        await self._tasks.aclose()
        await self.link.aclose()
        await self.inner.aclose()

    async def submit(self, spec: JobSpec, principal: Principal, job_id: str) -> Submitted:
        return self._submitted(await self.inner.submit(spec, principal, job_id))

    def _submitted(self, sub: Submitted) -> Submitted:
        if self.push is not None:
            now = time.monotonic()
            for bid in [b for b, t in self._fresh.items() if now - t > FRESH_S]:
                del self._fresh[bid]
            self._fresh[sub.backend_id] = now
        return sub

    def _from_sbatch(self, ids: list[str]) -> dict[str, JobUpdate]:
        """PENDING for the jobs submitted here lately that nothing was pushed of."""
        assert self.push is not None
        now, out = time.monotonic(), {}
        for bid in ids:
            at = self._fresh.get(bid)
            if at is not None and now - at <= FRESH_S and self.push.live:
                out[bid] = JobUpdate(bid, JobState.PENDING, reason=FRESH_REASON)
        self.fresh_answers += len(out)
        return out

    async def cancel(self, backend_id: str) -> None:
        await self.inner.cancel(backend_id)

    async def info(self) -> dict[str, Any]:
        out = await self._scheduler_info()
        out["facility_asked"] = self.asked
        out["facility_fresh_answers"] = self.fresh_answers
        if self.push is not None:
            out["facility_push"] = self.push.health()
        return out

    async def _scheduler_info(self) -> dict[str, Any]:
        """Partitions and nodes as the facility service read them (``facility.info``), at
        most ``INFO_TTL_S`` old; from the user's own backend when the service cannot say."""
        now = time.monotonic()
        if self._info is not None and now - self._info[0] < INFO_TTL_S:
            return dict(self._info[1])
        try:
            self.asked += 1
            result, _ = await self.link.call(self.me, "facility.info", {})
            sched = result.get("scheduler") if isinstance(result, dict) else None
        except (TenantryError, ValueError, KeyError):
            sched = None
        if not isinstance(sched, dict) or not isinstance(sched.get("partitions"), list):
            return await self.inner.info()
        default = next((p.get("name") for p in sched["partitions"] if isinstance(p, dict)
                        and p.get("default")), "")  # fmt: skip
        mine = {"partition": self.settings.slurm_partition or default,
                "account": self.settings.slurm_account} if self.settings else {}  # fmt: skip
        out = {**sched, "source": "facility", **({"defaults": mine} if mine else {})}
        self._info = (now, out)
        return dict(out)

    async def query(self, backend_ids: Sequence[str]) -> dict[str, JobUpdate]:
        ids = list(backend_ids)
        known: dict[str, JobUpdate] = {}
        if self.push is not None:  # pushed states first: no request at all for those
            pushed = {b: self.push.state_of(b) for b in ids}
            known = {b: u for b, u in pushed.items() if u is not None}
            self.from_facility += len(known)
            for bid in known:
                self._fresh.pop(bid, None)
            ids = [b for b in ids if b not in known]
            fresh = self._from_sbatch(ids)
            known.update(fresh)
            ids = [b for b in ids if b not in fresh]
            if not ids:
                return known
        try:
            self.asked += 1
            result, _ = await self.link.call(self.me, "facility.scheduler_status", {"ids": ids})
            for bid, raw in ((result or {}).get("jobs") or {}).items():
                if bid in ids and isinstance(raw, dict):
                    known[bid] = update_from_wire(raw)
                    self.from_facility += 1
        except (TenantryError, ValueError, KeyError):
            pass  # the user's own backend answers instead
        rest = [b for b in ids if b not in known]
        if rest:
            known.update(await self.inner.query(rest))
        return known


class RecoverableFacilityStatusBackend(FacilityStatusBackend):
    """The same, for a backend that finds jobs handed over before a crash."""

    async def submit(
        self, spec: JobSpec, principal: Principal, job_id: str, *, intent: str = ""
    ) -> Submitted:
        inner = self.inner
        assert isinstance(inner, Recoverable)
        return self._submitted(await inner.submit(spec, principal, job_id, intent=intent))

    async def find(
        self, spec: JobSpec, principal: Principal, job_id: str, intent: str
    ) -> Submitted | None:
        inner = self.inner
        assert isinstance(inner, Recoverable)
        return await inner.find(spec, principal, job_id, intent)


def with_facility_status(backend: Backend, settings: Settings) -> Backend:
    """The user's backend, taking job states from the facility service when it has them."""
    link = open_channel(settings.facility_address, float(settings.facility_timeout_s))
    push = bool(settings.facility_push)
    if isinstance(backend, Recoverable):
        return RecoverableFacilityStatusBackend(backend, link, push=push, settings=settings)
    return FacilityStatusBackend(backend, link, push=push, settings=settings)
