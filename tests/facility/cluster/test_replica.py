"""Replicas on one PostgreSQL: one leader polls, followers follow by LISTEN/NOTIFY."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import Any

import psycopg
import pytest

from tenantry.backends import slurm_parse as sp
from tenantry.core.models import JobState
from tenantry.facility import status_store as store
from tenantry.facility.leader import AConn, LeaderElection, connect
from tenantry.facility.poller import Viewer
from tenantry.facility.replica import ReplicatedStatus

STAFF = Viewer(0, "root", is_staff=True)
ALICE = Viewer(1001, "alice")


class Cluster:
    """One scripted queue every replica's source reads; counts the snapshots per replica."""

    def __init__(self) -> None:
        self.queue: list[sp.SlurmJob] = []
        self.snapshots: dict[str, int] = {}

    def source(self, name: str) -> Source:
        return Source(self, name)


class Source:
    def __init__(self, cluster: Cluster, name: str) -> None:
        self.cluster = cluster
        self.name = name

    async def snapshot(self) -> list[sp.SlurmJob]:
        self.cluster.snapshots[self.name] = self.cluster.snapshots.get(self.name, 0) + 1
        return list(self.cluster.queue)

    async def resolve(self, job_ids: Sequence[str]) -> list[sp.SlurmJob]:
        return []


def job(job_id: str, state: str, user: str = "alice") -> sp.SlurmJob:
    return sp.SlurmJob(job_id=job_id, raw_state=state, state=sp.map_state(state), user=user)


async def until(cond: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)


@pytest.fixture
async def replicas(pg_dsn: str) -> AsyncIterator[tuple[Cluster, list[ReplicatedStatus]]]:
    cluster = Cluster()
    reps = [
        ReplicatedStatus(pg_dsn, cluster.source(n), name=n, interval_s=0.1, resync_s=0.2)
        for n in ("a", "b")
    ]
    for r in reps:
        await r.start()
    yield cluster, reps
    for r in reps:
        await r.aclose()


async def test_migrations_are_idempotent(pg_dsn: str) -> None:
    conn = await connect(pg_dsn)
    try:
        first = await store.migrate(conn)
        assert await store.migrate(conn) == first >= 1
    finally:
        await conn.close()


async def test_one_leader_polls_and_followers_see_every_change(
    replicas: tuple[Cluster, list[ReplicatedStatus]],
) -> None:
    cluster, reps = replicas
    await until(lambda: sum(r.election.is_leader for r in reps) == 1, 10, "a leader")
    leader = next(r for r in reps if r.election.is_leader)
    follower = next(r for r in reps if not r.election.is_leader)
    cluster.queue = [job("1", "PENDING")]
    await until(lambda: follower.cache.seq > 0, 10, "the follower to see job 1")
    first = follower.status_of("1", ALICE).status.seq
    waiter = asyncio.create_task(follower.wait_change("1", ALICE, first, timeout_s=10))
    cluster.queue = [job("1", "RUNNING")]
    woke = await asyncio.wait_for(waiter, 10)
    assert woke.changed and woke.status.state is JobState.RUNNING
    # the same seq on both replicas, and only the leader ever asked the scheduler
    await until(lambda: leader.cache.seq == follower.cache.seq, 5, "replicas to agree")
    assert follower.name not in cluster.snapshots
    assert follower.health()["scheduler_polls"] == 0 < leader.health()["scheduler_polls"]
    assert follower.status_of("1", ALICE).staleness_s < 5
    with pytest.raises(Exception, match="no job 1 of yours"):
        follower.status_of("1", Viewer(1002, "bob"))


async def test_leadership_moves_when_the_leader_stops(
    replicas: tuple[Cluster, list[ReplicatedStatus]],
) -> None:
    cluster, reps = replicas
    await until(lambda: any(r.election.is_leader for r in reps), 10, "a leader")
    old = next(r for r in reps if r.election.is_leader)
    new = next(r for r in reps if r is not old)
    cluster.queue = [job("5", "RUNNING")]
    await until(lambda: new.cache.seq > 0, 10, "the follower to see job 5")
    since = new.status_of("5", ALICE).status.seq
    await old.aclose()
    # (the 5 s bound is the failover test's, with real processes; here only the move)
    assert await new.election.wait_leader(15), "the follower did not take over"
    before = cluster.snapshots.get(new.name, 0)
    cluster.queue = [job("5", "COMPLETED")]
    v = await new.wait_change("5", ALICE, since, timeout_s=10)
    assert v.status.state is JobState.COMPLETED
    assert cluster.snapshots[new.name] > before
    assert new.health()["epoch"] >= 2


async def test_a_second_session_cannot_take_a_held_lock(pg_dsn: str) -> None:
    started = asyncio.Event()
    release = asyncio.Event()

    async def lead(conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        started.set()
        await release.wait()

    a = LeaderElection(pg_dsn, lead, name="a", key=4242)
    b = LeaderElection(pg_dsn, lead, name="b", key=4242)
    ta = asyncio.create_task(a.run())
    assert await a.wait_leader(10)
    tb = asyncio.create_task(b.run())
    assert not await b.wait_leader(1.5)
    ta.cancel()
    assert await b.wait_leader(5)
    tb.cancel()
    await asyncio.gather(ta, tb, return_exceptions=True)


async def test_a_starting_replica_loads_active_and_recent_jobs_only(pg_dsn: str) -> None:
    from tenantry.facility.poller import JobStatus

    conn = await connect(pg_dsn)
    try:
        await store.migrate(conn)
        pub = store.PgPublisher(conn, "t")
        now = time.time()
        await pub.publish([JobStatus("old", "alice", JobState.COMPLETED)], now - 7200)
        await pub.publish([JobStatus("long", "alice", JobState.RUNNING)], now - 7200)
        await pub.publish([JobStatus("new", "alice", JobState.FAILED)], now - 10)
        rows = await store.current_statuses(conn, ended_after=now - 3600)
        assert [r.job_id for r in rows] == ["long", "new"]
        assert [r.seq for r in rows] == [2, 3]
        assert (await store.poll_state(conn)).observed_at == pytest.approx(now - 10)
    finally:
        await conn.close()


async def test_leadership_ends_when_its_session_is_killed(pg_dsn: str) -> None:
    """The leader's process lives on, but PostgreSQL ended its session: it must stop."""
    leading: dict[str, int] = {"a": 0, "b": 0}

    def lead_as(name: str) -> Callable[[AConn], Coroutine[Any, Any, None]]:
        async def lead(conn: AConn) -> None:
            while True:  # a singleton that writes through the lock's connection
                await conn.execute("SELECT 1")
                leading[name] += 1
                await asyncio.sleep(0.05)

        return lead

    a = LeaderElection(pg_dsn, lead_as("a"), name="a", key=4343, check_s=0.2)
    b = LeaderElection(pg_dsn, lead_as("b"), name="b", key=4343, check_s=0.2)
    ta = asyncio.create_task(a.run())
    assert await a.wait_leader(10)
    tb = asyncio.create_task(b.run())
    await until(lambda: b.backend_pid is not None, 10, "b to connect")
    assert not b.is_leader
    admin = await connect(pg_dsn)
    try:
        await admin.execute("SELECT pg_terminate_backend(%s)", (a.backend_pid,))
    finally:
        await admin.close()
    assert await b.wait_leader(5), "b did not take over within 5 s"
    await until(lambda: leading["b"] > 0, 5, "b's singleton to run")
    # a lost its term (it may compete again, but only one leads at a time)
    assert not (a.is_leader and b.is_leader)
    ta.cancel()
    tb.cancel()
    await asyncio.gather(ta, tb, return_exceptions=True)


async def test_an_idle_leader_polls_again_when_a_follower_is_read(pg_dsn: str) -> None:
    # the facility day: the cluster's one poller asked Slurm once a second with
    # nobody waiting; idle, it sleeps, and a read on any replica wakes it
    cluster = Cluster()
    reps = [
        ReplicatedStatus(
            pg_dsn, cluster.source(n), name=n, interval_s=0.05, resync_s=0.1, idle_after_s=0.3
        )
        for n in ("a", "b")
    ]
    for r in reps:
        await r.start()
    try:
        cluster.queue = [job("1", "RUNNING")]
        await until(lambda: sum(r.election.is_leader for r in reps) == 1, 10, "a leader")
        leader = next(r for r in reps if r.election.is_leader)
        follower = next(r for r in reps if not r.election.is_leader)
        await until(lambda: leader._poller is not None, 10, "the leader's poller")
        poller = leader._poller
        assert poller is not None
        await until(lambda: poller.asleep, 10, "the leader's poller to go idle")
        idle = cluster.snapshots[leader.name]
        await asyncio.sleep(0.5)  # ten intervals, no reader anywhere
        assert cluster.snapshots[leader.name] == idle
        cluster.queue = [job("1", "COMPLETED")]
        await until(lambda: "1" in {v.status.job_id for v in follower.jobs_of(STAFF)}, 10, "1")
        await until(
            lambda: follower.status_of("1", ALICE).status.state is JobState.COMPLETED,
            10,
            "the follower's read to wake the leader's poller",
        )
        assert cluster.snapshots[leader.name] > idle
    finally:
        for r in reps:
            await r.aclose()
