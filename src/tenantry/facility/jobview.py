"""``EventJobView``: job status of every user, built from the job events executors send.

Each executor still polls its own jobs (it runs as the user); the facility
service keeps the last view of every job from the ``job.submitted``,
``job.state`` and ``job.cancelled`` events, so staff see the whole facility
and each user their own. It implements ``JobStatusSource``; a cluster-wide
scheduler poller is the other implementation. Jobs are keyed ``user:job_id``
because job ids are per executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from tenantry.core.errors import NotFound
from tenantry.core.events import Event, EventType
from tenantry.core.models import JobState
from tenantry.facility.seams import Viewer

JOB_EVENTS = (EventType.JOB_SUBMITTED, EventType.JOB_STATE, EventType.JOB_CANCELLED)
MAX_JOBS = 100_000  # bounded: the oldest finished jobs are forgotten first


def _user_of(principal: str) -> str:
    return principal.split("/", 1)[0]


def _terminal(state: str) -> bool:
    try:
        return JobState(state).terminal
    except ValueError:
        return False


class EventJobView:
    def __init__(self) -> None:
        self._jobs: dict[str, dict[str, Any]] = {}
        self._changed: dict[str, asyncio.Event] = {}

    # -- feeding ---------------------------------------------------------------
    async def on_event(self, ev: Event) -> None:
        if ev.type not in JOB_EVENTS or not ev.subject:
            return
        self.apply(ev.type, ev.principal, ev.subject, ev.outcome, ev.data, ev.ts)

    def apply(
        self, kind: str, principal: str, job_id: str, outcome: str, data: dict[str, Any], ts: float
    ) -> None:
        user = _user_of(principal)
        key = f"{user}:{job_id}"
        view = self._jobs.get(key)
        if view is None:
            view = {
                "id": job_id,
                "key": key,
                "user": user,
                "principal": principal,
                "state": JobState.PENDING.value,
                "submitted_at": ts,
            }
            self._jobs[key] = view
            self._bound()
        elif ts < float(view.get("updated_at", 0.0)):
            return  # older than the view (read back from a replica's journal): no change
        if data.get("backend_id"):
            view["backend_id"] = data["backend_id"]
        if kind == EventType.JOB_SUBMITTED:
            view["name"] = data.get("name", "")
        elif kind == EventType.JOB_STATE and outcome:
            view["state"] = outcome
            for field in ("exit_code", "reason"):
                if field in data:
                    view[field] = data[field]
        elif kind == EventType.JOB_CANCELLED:
            view["cancel_requested"] = True
        view["updated_at"] = ts
        ev = self._changed.pop(key, None)
        if ev is not None:
            ev.set()

    def _bound(self) -> None:
        if len(self._jobs) <= MAX_JOBS:
            return
        done = sorted(
            (v["updated_at"] if "updated_at" in v else v["submitted_at"], k)
            for k, v in self._jobs.items()
            if _terminal(str(v["state"]))
        )
        for _ts, key in done[: len(self._jobs) - MAX_JOBS]:
            del self._jobs[key]

    # -- JobStatusSource ---------------------------------------------------------
    def _find(self, job_id: str, viewer: Viewer, owner: str) -> dict[str, Any]:
        key = job_id if ":" in job_id else f"{owner or viewer.user}:{job_id}"
        view = self._jobs.get(key)
        if view is None or not viewer.may_see(str(view["user"])):
            raise NotFound(f"no job {job_id} of yours at the facility", hint="see `jobs` for yours")
        return view

    def _out(self, view: dict[str, Any]) -> dict[str, Any]:
        out = dict(view)
        out["staleness_s"] = round(time.time() - float(view.get("updated_at", time.time())), 3)
        return out

    async def status_of(self, job_id: str, viewer: Viewer, owner: str = "") -> dict[str, Any]:
        return self._out(self._find(job_id, viewer, owner))

    async def jobs_of(self, viewer: Viewer, *, active: bool = False) -> list[dict[str, Any]]:
        rows = [
            self._out(v)
            for v in self._jobs.values()
            if viewer.may_see(str(v["user"])) and not (active and _terminal(str(v["state"])))
        ]
        return sorted(rows, key=lambda v: float(v["submitted_at"]), reverse=True)

    async def wait_change(
        self, job_id: str, viewer: Viewer, state: str, timeout_s: float, owner: str = ""
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            view = self._find(job_id, viewer, owner)
            left = deadline - time.monotonic()
            if view["state"] != state or left <= 0:
                return self._out(view)
            ev = self._changed.setdefault(str(view["key"]), asyncio.Event())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await ev.wait()
