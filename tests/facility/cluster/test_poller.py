"""The facility poller: one squeue for all users, per-user visibility, waiters, staleness."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator, Sequence

import pytest
from tests.facility.cluster import helpers as conf

from tenantry.backends import slurm_parse as sp
from tenantry.core import errors
from tenantry.core.models import JobState
from tenantry.facility.poller import (
    JobStatus,
    LocalPublisher,
    Poller,
    SlurmSnapshotSource,
    StatusCache,
    Viewer,
)

ALICE = Viewer(1001, "alice")
BOB = Viewer(1002, "bob")
STAFF = Viewer(1003, "carol", is_staff=True)


def job(job_id: str, user: str, state: str, **kw: object) -> sp.SlurmJob:
    return sp.SlurmJob(job_id=job_id, raw_state=state, state=sp.map_state(state), user=user,
                       **kw)  # type: ignore[arg-type]  # fmt: skip


class Source:
    """A scripted cluster for fast unit tests."""

    def __init__(self) -> None:
        self.queue: list[sp.SlurmJob] = []
        self.accounting: dict[str, sp.SlurmJob] = {}
        self.snapshots = 0
        self.resolved: list[list[str]] = []
        self.fail = False

    async def snapshot(self) -> list[sp.SlurmJob]:
        self.snapshots += 1
        if self.fail:
            raise errors.BackendUnavailable("controller down")
        return list(self.queue)

    async def resolve(self, job_ids: Sequence[str]) -> list[sp.SlurmJob]:
        self.resolved.append(list(job_ids))
        return [self.accounting[i] for i in job_ids if i in self.accounting]


def make() -> tuple[Source, StatusCache, Poller]:
    src = Source()
    cache = StatusCache()
    return src, cache, Poller(src, cache, LocalPublisher(cache), interval_s=0.01)


async def test_users_see_their_own_jobs_and_staff_see_all() -> None:
    src, cache, poller = make()
    src.queue = [job("1", "alice", "RUNNING", comment="tag-a"), job("2", "bob", "PENDING")]
    await poller.poll_once()
    assert [v.status.job_id for v in cache.jobs_of(ALICE)] == ["1"]
    assert [v.status.job_id for v in cache.jobs_of(BOB)] == ["2"]
    assert {v.status.job_id for v in cache.jobs_of(STAFF)} == {"1", "2"}
    assert cache.status_of("1", ALICE).status.state is JobState.RUNNING
    # another user's job and an unknown one answer the same
    with pytest.raises(errors.NotFound) as other:
        cache.status_of("1", BOB)
    with pytest.raises(errors.NotFound) as unknown:
        cache.status_of("999", BOB)
    assert other.value.message.replace("1", "X") == unknown.value.message.replace("999", "X")
    with pytest.raises(errors.NotFound):
        await cache.wait_change("1", BOB, 0, timeout_s=0.01)


async def test_without_private_data_others_see_state_but_not_the_comment() -> None:
    src, cache, poller = make()
    cache.private_jobs = False
    src.queue = [job("1", "alice", "RUNNING", comment="tag-a")]
    await poller.poll_once()
    seen = cache.status_of("1", BOB).status
    assert seen.state is JobState.RUNNING and seen.comment == ""
    assert cache.status_of("1", ALICE).status.comment == "tag-a"
    assert cache.status_of("1", STAFF).status.comment == "tag-a"


async def test_one_snapshot_per_poll_whatever_the_number_of_readers() -> None:
    src, cache, poller = make()
    src.queue = [job(str(i), f"u{i % 10}", "RUNNING") for i in range(100)]
    await poller.poll_once()
    viewers = [Viewer(i, f"u{i % 10}") for i in range(100)]
    for v in viewers:
        assert len(cache.jobs_of(v)) == 10
    assert src.snapshots == 1


async def test_jobs_that_left_the_queue_are_resolved_in_one_sacct_call() -> None:
    src, cache, poller = make()
    src.queue = [job("1", "alice", "RUNNING"), job("2", "alice", "RUNNING")]
    await poller.poll_once()
    src.queue = []
    src.accounting = {"1": job("1", "alice", "COMPLETED", exit_code=0),
                      "2": job("2", "alice", "FAILED", exit_code=3)}  # fmt: skip
    await poller.poll_once()
    assert src.resolved == [["1", "2"]]
    assert cache.status_of("2", ALICE).status.exit_code == 3
    await poller.poll_once()  # terminal now: not asked again
    assert src.resolved == [["1", "2"]]


async def test_waiter_gets_every_change_in_order_from_since() -> None:
    src, cache, poller = make()
    src.queue = [job("7", "alice", "PENDING")]
    await poller.poll_once()
    first = cache.status_of("7", ALICE).status.seq
    got: list[str] = []

    async def waiter() -> None:
        since = first
        while True:
            v = await cache.wait_change("7", ALICE, since, timeout_s=5)
            assert v.changed
            got.append(v.status.state.value)
            since = v.status.seq
            if v.status.state.terminal:
                return

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)
    # two changes between the waiter's reads are both delivered, in order
    src.queue = [job("7", "alice", "RUNNING")]
    await poller.poll_once()
    src.queue = [job("7", "alice", "COMPLETED", exit_code=0)]
    await poller.poll_once()
    await asyncio.wait_for(task, 5)
    assert got == ["RUNNING", "COMPLETED"]
    # a late waiter resuming from the first seq still sees both
    late = await cache.wait_change("7", ALICE, first, timeout_s=0)
    assert late.status.state is JobState.RUNNING


async def test_wait_times_out_with_the_current_status() -> None:
    src, cache, poller = make()
    src.queue = [job("7", "alice", "RUNNING")]
    await poller.poll_once()
    cur = cache.status_of("7", ALICE).status.seq
    v = await cache.wait_change("7", ALICE, cur, timeout_s=0.05)
    assert not v.changed and v.status.seq == cur


async def test_staleness_grows_while_slurm_is_down_and_is_reported() -> None:
    now = [1000.0]
    src = Source()
    cache = StatusCache(clock=lambda: now[0])
    poller = Poller(src, cache, LocalPublisher(cache))
    with pytest.raises(errors.Unavailable):  # nothing polled yet: no answer, not "unknown"
        cache.status_of("1", ALICE)
    src.queue = [job("1", "alice", "RUNNING")]
    await poller.poll_once()
    assert cache.status_of("1", ALICE).staleness_s == 0
    src.fail = True
    now[0] += 30
    with pytest.raises(errors.BackendUnavailable):
        await poller.poll_once()
    cache.mark_failed("controller down")
    assert cache.status_of("1", ALICE).staleness_s == 30
    assert cache.health.consecutive_failures == 1
    assert cache.health.last_error == "controller down"


async def test_absorb_is_idempotent_and_ordered_by_seq() -> None:
    cache = StatusCache()
    a1 = JobStatus("1", "alice", JobState.PENDING, seq=5)
    a2 = JobStatus("1", "alice", JobState.RUNNING, seq=9)
    assert cache.absorb([a2, a1]) == 2
    assert cache.absorb([a1, a2]) == 0
    cache.mark_polled(1.0)
    assert cache.status_of("1", ALICE).status.state is JobState.RUNNING
    assert JobStatus.from_dict(a2.to_dict()) == a2


async def test_poller_loop_backs_off_and_recovers() -> None:
    src, cache, poller = make()
    src.fail = True
    task = asyncio.create_task(poller.run())
    try:
        for _ in range(500):
            if cache.health.failures >= 2:
                break
            await asyncio.sleep(0.01)
        assert cache.health.failures >= 2
        src.fail = False
        src.queue = [job("1", "alice", "RUNNING")]
        for _ in range(500):
            if cache.health.polls:
                break
            await asyncio.sleep(0.02)
        assert cache.status_of("1", ALICE).status.state is JobState.RUNNING
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


# -- real Slurm -----------------------------------------------------------------------


@pytest.mark.slurm
async def test_real_slurm_two_users_one_poller(slurm_users: list[conf.User]) -> None:
    alice, bob = slurm_users
    a = conf.sbatch_as(alice, wrap="sleep 2")
    b = conf.sbatch_as(bob, wrap="sleep 60")
    src = SlurmSnapshotSource(timeout_s=30)
    cache = StatusCache()
    poller = Poller(src, cache, LocalPublisher(cache), interval_s=0.5)
    va = Viewer(alice.uid, alice.name)
    vb = Viewer(bob.uid, bob.name)
    task = asyncio.create_task(poller.run())
    try:
        for _ in range(200):
            if cache.health.polls:
                break
            await asyncio.sleep(0.05)
        mine = {v.status.job_id for v in cache.jobs_of(va)}
        assert a in mine and b not in mine
        assert b in {v.status.job_id for v in cache.jobs_of(Viewer(0, "root", is_staff=True))}
        with pytest.raises(errors.NotFound):
            cache.status_of(b, va)
        assert cache.status_of(b, vb).status.user == bob.name
        since = 0
        states: list[str] = []
        while True:
            v = await cache.wait_change(a, va, since, timeout_s=60)
            assert v.changed, "alice's job did not finish within 60 s"
            states.append(v.status.state.value)
            since = v.status.seq
            if v.status.state.terminal:
                break
        assert states[-1] == "COMPLETED"
        assert cache.status_of(a, va).staleness_s < 5
        # every reader was served by the same few squeue calls
        assert src.calls["squeue"] == cache.health.polls + cache.health.failures
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        subprocess.run(["scancel", b], check=False)


async def test_job_unknown_to_queue_and_accounting_becomes_lost() -> None:
    src, cache, poller = make()
    src.queue = [job("3", "alice", "RUNNING"), job("4_[2-5]", "alice", "PENDING")]
    await poller.poll_once()
    src.queue = []
    for _ in range(3):
        await poller.poll_once()
    assert cache.status_of("3", ALICE).status.state is JobState.LOST
    assert src.resolved == [["3"]] * 3  # the array's pending rest is never sent to sacct
    with pytest.raises(errors.NotFound):
        cache.status_of("4_[2-5]", ALICE)
    await poller.poll_once()
    assert src.resolved == [["3"]] * 3


async def test_finished_jobs_are_forgotten_after_retention() -> None:
    now = [1000.0]
    src = Source()
    cache = StatusCache(clock=lambda: now[0], retain_s=60)
    poller = Poller(src, cache, LocalPublisher(cache))
    src.queue = [job("1", "alice", "COMPLETED"), job("2", "alice", "RUNNING")]
    await poller.poll_once()
    now[0] += 61
    await poller.poll_once()
    assert [v.status.job_id for v in cache.jobs_of(ALICE)] == ["2"]


async def test_failing_accounting_does_not_freeze_the_queue() -> None:
    src, cache, poller = make()
    src.queue = [job("1", "alice", "RUNNING"), job("2", "alice", "PENDING")]
    await poller.poll_once()

    async def broken(job_ids: Sequence[str]) -> list[sp.SlurmJob]:
        raise errors.BackendError("sacct: fatal: Bad job array element specified: 1")

    src.resolve = broken  # type: ignore[method-assign]
    src.queue = [job("2", "alice", "RUNNING")]  # 1 left the queue; sacct fails
    for _ in range(5):
        await poller.poll_once()
    assert cache.status_of("2", ALICE).status.state is JobState.RUNNING
    assert cache.status_of("1", ALICE).status.state is JobState.RUNNING  # not LOST: unknown
    assert "accounting" in cache.health.last_error


async def test_wait_for_a_job_that_appears_at_the_next_poll() -> None:
    src, cache, poller = make()
    await poller.poll_once()
    waiter = asyncio.create_task(cache.wait_change("9", ALICE, 0, timeout_s=5))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    src.queue = [job("9", "alice", "PENDING")]
    await poller.poll_once()
    v = await asyncio.wait_for(waiter, 5)
    assert v.changed and v.status.job_id == "9"


async def test_wait_on_another_users_job_looks_like_an_unknown_one() -> None:
    src, cache, poller = make()
    cache.appear_s = 0.2
    src.queue = [job("1", "alice", "RUNNING")]
    await poller.poll_once()
    loop = asyncio.get_running_loop()
    for ref in ("1", "404"):
        t0 = loop.time()
        with pytest.raises(errors.NotFound):
            await cache.wait_change(ref, BOB, 0, timeout_s=5)
        assert 0.15 < loop.time() - t0 < 2


async def test_the_services_viewer_is_the_one_the_cache_filters_by() -> None:
    from tenantry.facility import seams

    assert Viewer is seams.Viewer  # one type: what identity proves is what the cache reads
    src, cache, poller = make()
    src.queue = [job("1", "alice", "RUNNING"), job("2", "bob", "RUNNING")]
    await poller.poll_once()
    assert [v.status.job_id for v in cache.jobs_of(seams.Viewer(1, "bob"))] == ["2"]
    assert len(cache.jobs_of(seams.Viewer(3, "carol", is_staff=True))) == 2


def _one_running_job(
    idle_after_s: float | None = None, slow_s: float | None = None
) -> tuple[Source, StatusCache, Poller]:
    src = Source()
    cache = StatusCache()
    src.queue = [job("1", "alice", "RUNNING")]
    poller = Poller(src, cache, LocalPublisher(cache), interval_s=0.01,
                    idle_after_s=idle_after_s, slow_s=slow_s)  # fmt: skip
    return src, cache, poller


@contextlib.asynccontextmanager
async def _running(poller: Poller) -> AsyncIterator[None]:
    task = asyncio.create_task(poller.run())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _until(cond: object, what: str, limit_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + limit_s
    while not cond():  # type: ignore[operator]
        assert asyncio.get_running_loop().time() < deadline, what
        await asyncio.sleep(0.005)


async def test_idle_poller_stops_asking_slurm_until_someone_reads() -> None:
    # the facility day: a poller that asked once a second whether anyone read or
    # not cost the controller more than the agents it replaced
    src, cache, poller = _one_running_job(idle_after_s=0.05)
    async with _running(poller):
        await _until(lambda: poller.asleep, "the poller went idle")
        idle = src.snapshots
        await asyncio.sleep(0.2)  # twenty intervals without a reader
        assert src.snapshots == idle
        assert cache.status_of("1", ALICE).staleness_s >= 0.15
        await _until(lambda: src.snapshots > idle, "a read woke the poller")
        assert cache.status_of("1", ALICE).staleness_s < 0.15
        src.queue = [job("1", "alice", "COMPLETED", exit_code=0)]
        waiter = asyncio.create_task(cache.wait_change("1", ALICE, cache.seq, timeout_s=5))
        await asyncio.sleep(0.2)  # a waiter keeps it polling: each poll wakes it to look
        assert (await waiter).status.state is JobState.COMPLETED


async def test_scheduler_answers_leave_out_what_an_idle_poller_last_saw() -> None:
    from tenantry.facility.polled_status import PolledScheduler
    from tenantry.facility.seams import Viewer as SeamViewer

    src, cache, poller = make()
    clock = [1000.0]
    cache.clock = lambda: clock[0]
    src.queue = [job("1", "alice", "RUNNING")]
    await poller.poll_once()
    sched = PolledScheduler(cache, max_stale_s=5.0)
    me = SeamViewer(uid=1001, user="alice")
    assert set(await sched.query(["1"], me)) == {"1"}
    clock[0] += 30  # nobody polled for 30 s: the executor asks its own backend
    assert await sched.query(["1"], me) == {}


async def test_poller_backs_off_while_nothing_changes_and_hurries_for_a_new_job() -> None:
    # the facility day: the cluster's poller asked once a second while nothing
    # changed, more than the user daemons' pollers (0.5 s backing off to 5 s) did
    src, cache, poller = _one_running_job(slow_s=0.4)
    async with _running(poller):
        await asyncio.sleep(1.0)
        # fixed 0.01 s: ~100 polls; backing off 1.5x to 0.4 s: about a dozen
        assert 3 <= src.snapshots <= 20, src.snapshots
        before = src.snapshots
        src.queue = [job("1", "alice", "RUNNING"), job("2", "alice", "PENDING")]
        with pytest.raises(errors.NotFound):
            cache.status_of("2", ALICE)  # just submitted: not in the cache yet
        await _until(lambda: src.snapshots > before, "a miss hurried the poller", 0.3)
        assert cache.status_of("2", ALICE).status.state is JobState.PENDING


class Churn(Source):
    """A busy shared cluster: another user's job changes state on every poll."""

    async def snapshot(self) -> list[sp.SlurmJob]:
        state = "RUNNING" if self.snapshots % 2 else "PENDING"
        self.queue = [*(j for j in self.queue if j.user != "bob"), job("9", "bob", state)]
        return await super().snapshot()


async def test_poller_pace_follows_watched_jobs_not_the_whole_cluster() -> None:
    # the facility day: on a shared Slurm every other user's job kept the
    # cluster poller at its fastest although no reader watched those jobs
    src = Churn()
    cache = StatusCache()
    src.queue = [job("1", "alice", "RUNNING")]
    poller = Poller(src, cache, LocalPublisher(cache), interval_s=0.01, slow_s=0.4)
    async with _running(poller):
        await _until(lambda: src.snapshots >= 1, "first poll", 1.0)
        await asyncio.sleep(0.01)
        cache.jobs_of(ALICE)  # alice reads: her jobs are watched, bob's are not
        src.snapshots = 0
        await asyncio.sleep(1.0)
        assert 3 <= src.snapshots <= 20, src.snapshots  # changing every poll: ~100
        before = src.snapshots
        src.queue = [job("1", "alice", "COMPLETED"), *(j for j in src.queue if j.user == "bob")]
        await _until(lambda: cache.status_of("1", ALICE).status.state.terminal, "seen", 1.0)
        cache.jobs_of(BOB)  # now bob reads too: his churn keeps the poller fast
        await asyncio.sleep(0.5)
        assert src.snapshots - before >= 15, src.snapshots - before
