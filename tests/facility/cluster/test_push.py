"""Pushed job changes: the service's long poll, and the executor's resumed subscription."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tenantry.core.models import JobState, Principal
from tenantry.facility.poller import JobStatus, StatusCache
from tenantry.facility.push import StatusPush, changes_for
from tenantry.facility.seams import FacilityChannel, FacilityRequest

ALICE = Principal(uid=1001, user="alice")


def st(job: str, state: JobState, seq: int, user: str = "alice") -> JobStatus:
    return JobStatus(job_id=job, user=user, state=state, seq=seq, observed_at=1.0)


async def test_changes_after_since_are_the_users_own_in_order() -> None:
    cache = StatusCache()
    cache.absorb([st("1", JobState.PENDING, 1), st("2", JobState.RUNNING, 2, user="bob")])
    cache.absorb([st("1", JobState.RUNNING, 3), st("3", JobState.PENDING, 4)])
    out = await changes_for(cache, "alice", 1, 0.0, stream="s", their_stream="s")
    assert [(c["backend_id"], c["state"]) for c in out["changes"]] == [
        ("1", "RUNNING"),
        ("3", "PENDING"),
    ]
    assert out["seq"] == 4 and out["reset"] is False
    # bob's job never reaches alice's executor
    assert all(c["backend_id"] != "2" for c in out["changes"])


async def test_a_long_poll_returns_on_the_users_next_change_only() -> None:
    cache = StatusCache()
    cache.absorb([st("1", JobState.RUNNING, 1)])
    task = asyncio.create_task(changes_for(cache, "alice", 1, 10.0, stream="s", their_stream="s"))
    await asyncio.sleep(0.05)
    cache.absorb([st("9", JobState.RUNNING, 2, user="bob")])  # another user's: keeps waiting
    await asyncio.sleep(0.05)
    assert not task.done()
    cache.absorb([st("1", JobState.COMPLETED, 3)])
    out = await asyncio.wait_for(task, 5)
    assert [c["state"] for c in out["changes"]] == ["COMPLETED"] and out["seq"] == 3


@pytest.mark.parametrize(("since", "theirs"), [(0, "s"), (99, "s"), (2, "an-older-service")])
async def test_a_since_the_cache_cannot_continue_gets_the_current_states(
    since: int, theirs: str
) -> None:
    cache = StatusCache()
    cache.absorb([st("1", JobState.RUNNING, 1), st("1", JobState.COMPLETED, 5)])
    out = await changes_for(cache, "alice", since, 0.0, stream="s", their_stream=theirs)
    assert out["reset"] is True and out["stream"] == "s"
    assert [(c["backend_id"], c["state"]) for c in out["changes"]] == [("1", "COMPLETED")]


class DroppingLink(FacilityChannel):
    """A channel to a real ``changes_for`` over a cache, that can be cut and restored."""

    def __init__(self, cache: StatusCache) -> None:
        super().__init__("test://dropping", 1.0)
        self.cache = cache
        self.up = asyncio.Event()
        self.up.set()
        self.sinces: list[int] = []

    async def send(self, req: FacilityRequest) -> tuple[Any, list[str]]:
        if not self.up.is_set():
            raise self._down("the link is down")
        since, theirs = int(req.params["since"]), str(req.params["stream"])
        self.sinces.append(since)
        user = req.principal.user
        return await changes_for(self.cache, user, since, 0.2, stream="s", their_stream=theirs), []

    async def aclose(self) -> None:
        return None


async def until(cond: Any, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


async def test_the_executor_catches_up_on_changes_missed_while_the_link_was_down() -> None:
    cache = StatusCache()
    cache.absorb([st("7", JobState.PENDING, 1)])
    link = DroppingLink(cache)
    woken: list[int] = []
    push = StatusPush(link, ALICE, wait_s=0.2, on_change=lambda: woken.append(1))
    runner = asyncio.create_task(push.run())
    try:
        await until(lambda: push.live and push.state_of("7") is not None, 5, "the first push")
        state = push.state_of("7")
        assert state is not None and state.state is JobState.PENDING
        link.up.clear()  # the link drops ...
        await until(lambda: not push.live, 5, "the push to notice")
        assert push.state_of("7") is None  # not live: the daemon's own poll answers
        seen, taken, mark = push.seq, push.changes, len(link.sinces)
        cache.absorb([st("7", JobState.RUNNING, 2), st("7", JobState.COMPLETED, 3)])
        link.up.set()  # ... and comes back
        await until(lambda: push.live and push.seq == 3, 5, "the catch-up")
        assert link.sinces[mark] == seen == 1  # resumed from the last seq it had taken
        assert push.changes == taken + 2 and push.resets == 1  # both, not only the last
        state = push.state_of("7")
        assert state is not None and state.state is JobState.COMPLETED
        assert push.reconnects == 1 and woken
    finally:
        runner.cancel()
        with pytest.raises(asyncio.CancelledError):
            await runner
