"""PolledJobView: the service's job views with the state of the cluster's one poller."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tenantry.backends import slurm_parse as sp
from tenantry.core import errors
from tenantry.facility.polled_view import PolledJobView
from tenantry.facility.poller import LocalPublisher, Poller, StatusCache, Viewer

ALICE = Viewer(1, "alice")
BOB = Viewer(2, "bob")


class Views:
    """Event-built views (as the facility service keeps them), keyed user:id."""

    def __init__(self, views: list[dict[str, Any]]) -> None:
        self.views = {f"{v['user']}:{v['id']}": v for v in views}
        self.waits = 0

    def _find(self, job_id: str, viewer: Any, owner: str) -> dict[str, Any]:
        v = self.views.get(f"{owner or viewer.user}:{job_id}")
        if v is None or not (viewer.is_staff or v["user"] == viewer.user):
            raise errors.NotFound(f"no job {job_id} of yours")
        return dict(v)

    async def status_of(self, job_id: str, viewer: Any, owner: str = "") -> dict[str, Any]:
        return self._find(job_id, viewer, owner)

    async def jobs_of(self, viewer: Any, *, active: bool = False) -> list[dict[str, Any]]:
        return [dict(v) for v in self.views.values() if viewer.is_staff or v["user"] == viewer.user]

    async def wait_change(
        self, job_id: str, viewer: Any, state: str, timeout_s: float, owner: str = ""
    ) -> dict[str, Any]:
        self.waits += 1
        return self._find(job_id, viewer, owner)


class Queue:
    def __init__(self) -> None:
        self.jobs: list[sp.SlurmJob] = []

    async def snapshot(self) -> list[sp.SlurmJob]:
        return list(self.jobs)

    async def resolve(self, job_ids: Any) -> list[sp.SlurmJob]:
        return []


def sj(job_id: str, user: str, state: str) -> sp.SlurmJob:
    return sp.SlurmJob(job_id=job_id, raw_state=state, state=sp.map_state(state), user=user)


async def setup() -> tuple[Queue, Poller, PolledJobView, Views]:
    q = Queue()
    cache = StatusCache()
    poller = Poller(q, cache, LocalPublisher(cache))
    views = Views(
        [
            {"id": "t1", "user": "alice", "state": "PENDING", "backend_id": "101"},
            # an event that names bob's Slurm job: never shown with that job's state
            {"id": "t2", "user": "alice", "state": "PENDING", "backend_id": "202"},
            {"id": "t3", "user": "alice", "state": "RUNNING"},  # no Slurm id (local job)
        ]
    )
    q.jobs = [sj("101", "alice", "RUNNING"), sj("202", "bob", "FAILED")]
    await poller.poll_once()
    return q, poller, PolledJobView(views, cache), views


async def test_state_comes_from_the_poller_for_the_same_user_only() -> None:
    _, _, pv, _ = await setup()
    t1 = await pv.status_of("t1", ALICE)
    assert t1["state"] == "RUNNING" and t1["served_from"] == "poller" and "staleness_s" in t1
    t2 = await pv.status_of("t2", ALICE)
    assert t2["state"] == "PENDING" and "served_from" not in t2
    assert (await pv.status_of("t3", ALICE))["state"] == "RUNNING"
    with pytest.raises(errors.NotFound):
        await pv.status_of("t1", BOB)
    assert {r["id"] for r in await pv.jobs_of(ALICE, active=True)} == {"t1", "t2", "t3"}


async def test_wait_change_wakes_on_the_polled_state() -> None:
    q, poller, pv, views = await setup()
    waiter = asyncio.create_task(pv.wait_change("t1", ALICE, "RUNNING", 5))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    q.jobs = [sj("101", "alice", "COMPLETED")]
    await poller.poll_once()
    done = await asyncio.wait_for(waiter, 5)
    assert done["state"] == "COMPLETED"
    timed_out = await pv.wait_change("t1", ALICE, "COMPLETED", 0.05)
    assert timed_out["state"] == "COMPLETED"
    await pv.wait_change("t3", ALICE, "RUNNING", 0.05)  # not polled: the source waits
    assert views.waits == 1
