"""One facility replica's job status: follower always, poller while leader.

:class:`ReplicatedStatus` is what the facility service holds: a
:class:`~tenantry.facility.poller.StatusCache` kept current from the shared
PostgreSQL status log (LISTEN/NOTIFY, plus a read every ``resync_s`` in case
a notification is lost while reconnecting), and a
:class:`~tenantry.facility.leader.LeaderElection` that, on the replica that
wins it, catches up with the log and runs the one
:class:`~tenantry.facility.poller.Poller` of the cluster.

Waiters resume from the last ``seq`` they saw, on any replica: the log is
shared and ``wait_change`` returns the first change after ``since``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import KW_ONLY, InitVar, dataclass, field
from typing import Any

import psycopg

from tenantry.core import errors
from tenantry.core.tasks import TaskGroup
from tenantry.facility import status_store as store
from tenantry.facility.leader import AConn, LeaderElection, connect
from tenantry.facility.pg_listen import connected, follow_channel
from tenantry.facility.poller import (
    Poller,
    SerialPublisher,
    SnapshotSource,
    StatusCache,
    StatusView,
    Viewer,
)
from tenantry.facility.slurm_events import EventFeed, EventLog

__all__ = ["ReplicatedStatus"]

log = logging.getLogger(__name__)

WANT_CHANNEL = "tenantry_facility_status_want"  # a follower has readers: the leader polls


@dataclass(eq=False, repr=False)  # identity and the default repr, as a plain class
class ReplicatedStatus:
    """Job status for every user, the same on every replica; lifecycle: start/aclose."""

    dsn: str
    source: SnapshotSource
    _: KW_ONLY
    name: str
    interval_s: float = 1.0
    resync_s: float = 1.0
    private_jobs: InitVar[bool] = True
    history: int = 32
    lock_key: InitVar[int | None] = None
    # the leader's poller sleeps after idle_after_s without a reader on *any*
    # replica: a follower's reads reach it as a NOTIFY on WANT_CHANNEL
    idle_after_s: float | None = None
    slow_s: float | None = None  # the leader's poller backs off to this while nothing changes
    # slurmctld's job events, read by the leader (``slurm_events``): its poller then polls
    # every safety_s while they are healthy
    events_log: EventLog | None = None
    safety_s: float = 60.0
    feed: EventFeed | None = field(default=None, init=False)
    epoch: int = field(default=0, init=False)
    follower_connected: bool = field(default=False, init=False)
    _poller: Poller | None = field(default=None, init=False)
    _want_pending: bool = field(default=False, init=False)

    def __post_init__(self, private_jobs: bool, lock_key: int | None) -> None:
        self.cache = StatusCache(history=self.history, private_jobs=private_jobs)
        self.election = LeaderElection(self.dsn, self._lead, name=self.name)
        if lock_key is not None:
            self.election.key = lock_key
        self.tasks = TaskGroup("facility-status")
        if self.idle_after_s is not None:
            self.cache.on_read = self._read

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        try:
            conn = await connect(self.dsn)
        except psycopg.Error as exc:
            raise errors.StoreError(
                f"cannot reach the facility database: {exc}", hint="check store_url"
            ) from exc
        try:
            await store.migrate(conn)
            await self._catch_up(conn, full=True)
        finally:
            await conn.close()
        self.tasks.supervise("status-follower", self._follow)
        self.tasks.supervise("leader-election", self.election.run)
        if self.idle_after_s is not None:
            self.tasks.supervise("status-wants", self._listen_wants)

    async def aclose(self) -> None:
        await self.tasks.aclose()

    # -- the reads (delegated to the cache) -------------------------------------------
    def status_of(self, job_id: str, viewer: Viewer) -> StatusView:
        return self.cache.status_of(job_id, viewer)

    def jobs_of(self, viewer: Viewer, *, active_only: bool = False) -> list[StatusView]:
        return self.cache.jobs_of(viewer, active_only=active_only)

    async def wait_change(
        self, job_id: str, viewer: Viewer, since: int, *, timeout_s: float | None = None
    ) -> StatusView:
        return await self.cache.wait_change(job_id, viewer, since, timeout_s=timeout_s)

    def health(self) -> dict[str, Any]:
        h = self.cache.health
        return {
            "replica": self.name,
            "leader": self.election.is_leader,
            "leader_terms": self.election.terms,
            "epoch": self.epoch,
            "seq": self.cache.seq,
            "observed_at": h.observed_at,
            "staleness_s": h.staleness_s(self.cache.clock()),
            "scheduler_polls": h.polls,  # by this replica, while leader
            "poll_failures": h.failures,
            "last_error": h.last_error or self.election.last_error,
            "follower_connected": self.follower_connected,
            "slurm_events": self.feed.health() if self.feed is not None else None,
        }

    def _read(self) -> None:
        if self._poller is not None:
            self._poller.want()
        else:
            self._want_pending = True  # the follower loop tells the leader

    # -- follower ---------------------------------------------------------------------
    async def _catch_up(self, conn: AConn, *, full: bool = False) -> None:
        # the poll time first: it may only understate freshness, never overstate it
        state = await store.poll_state(conn)
        if full:
            ended_after = self.cache.clock() - self.cache.retain_s
            rows = await store.current_statuses(conn, history=self.history, ended_after=ended_after)
        else:
            rows = []
            while True:  # a long gap is read in pages
                page = await store.changes_since(conn, rows[-1].seq if rows else self.cache.seq)
                rows.extend(page)
                if len(page) < 10_000:
                    break
        # no await between the two: a reader never sees changes without their freshness
        self.cache.absorb(rows)
        if state.observed_at > 0:
            self.cache.mark_polled(state.observed_at, by_me=False)

    async def _follow(self) -> None:
        """LISTEN for the leader's announcements; read the log after each (and every resync_s)."""
        await follow_channel(
            self.dsn,
            store.CHANNEL,
            self._follower_wake,
            resync_s=self.resync_s,
            what=f"facility follower {self.name}",
            on_state=self._connected,
        )

    async def _follower_wake(self, conn: AConn) -> None:
        if self._want_pending and self._poller is None:
            self._want_pending = False  # this replica has readers: tell the leader
            await conn.execute(f"NOTIFY {WANT_CHANNEL}".encode())
        await self._catch_up(conn)

    def _connected(self, up: bool) -> None:
        self.follower_connected = up

    async def _listen_wants(self) -> None:
        """While leader: a follower's NOTIFY on WANT_CHANNEL wakes the poller."""
        while True:
            conn = await connected(self.dsn, self.resync_s, f"facility replica {self.name}")
            try:
                await conn.execute(f"LISTEN {WANT_CHANNEL}".encode())
                async for _note in conn.notifies():
                    if self._poller is not None:
                        self._poller.want()
            except psycopg.Error as exc:
                log.warning("facility replica %s: wants lost: %s", self.name, exc)
            finally:
                with contextlib.suppress(Exception):
                    await conn.close()
            await asyncio.sleep(self.resync_s)

    # -- leader -----------------------------------------------------------------------
    async def _lead(self, conn: AConn) -> None:
        pg = store.PgPublisher(conn, self.name)
        self.epoch = await pg.become_leader()
        await self._catch_up(conn)  # never diff against a cache behind the log
        publisher = SerialPublisher(pg)
        feed = None
        if self.events_log is not None:
            feed = EventFeed(self.events_log, self.cache, publisher, self.source)
        poller = Poller(
            self.source,
            self.cache,
            publisher,
            interval_s=self.interval_s,
            idle_after_s=self.idle_after_s,
            slow_s=self.slow_s,
            events=feed,
            safety_s=self.safety_s,
        )
        if self.idle_after_s is not None:
            self.cache.on_read = self._read
        self._poller, self.feed = poller, feed
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(poller.run())
                if feed is not None:
                    group.create_task(feed.run())
        finally:
            self._poller = None
            self.cache.on_miss = None
