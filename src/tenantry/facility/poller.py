"""One scheduler poller per cluster, serving every user from one status cache.

The poller asks Slurm once per interval for *all* jobs (``squeue --all`` in its
columns, no ``--me``; jobs that left the queue are resolved with one ``sacct`` call)
and feeds the :class:`StatusCache`. Every user daemon and waiter reads the
cache; the controller sees one poller, whatever the number of agents.

Each change of a job's status gets a sequence number (``seq``) from a
:class:`Publisher`: a local counter in a single service, the shared
PostgreSQL log between replicas (``tenantry.facility.status_store``), so a
waiter that resumes ``since`` its last seen number on any replica misses no
change. The cache keeps a short history per job and :meth:`StatusCache.wait_change`
returns the *next* change after ``since``, not only the newest.

Visibility (Slurm's PrivateData=jobs idea, always on by default): a
:class:`Viewer` sees only the jobs of their own user name; staff (a Unix group,
decided by the service from the socket, never a claim) see all. An unknown job
and another user's job give the same NotFound, so ids cannot be probed. With
``private_jobs=False`` every user sees every job's state, but the job comment
(Tenantry's attribution tag) stays the owner's and staff's.

Every answer carries ``staleness_s``: seconds since the poll it reflects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import Any, Protocol

from tenantry.backends import slurm_parse as sp
from tenantry.backends import squeue_fields
from tenantry.backends.slurm_tools import run_slurm_tool
from tenantry.core import errors
from tenantry.core.models import JobState
from tenantry.facility.seams import Viewer

__all__ = [
    "EventSource",
    "JobStatus",
    "LocalPublisher",
    "PollHealth",
    "Poller",
    "Publisher",
    "SerialPublisher",
    "SlurmSnapshotSource",
    "SnapshotSource",
    "StatusCache",
    "StatusView",
    "Viewer",
]

log = logging.getLogger(__name__)

WATCH_S = 90.0  # a reader's jobs stay watched this long after its last read (> a long poll)
_PLAIN_ID = re.compile(r"^\d+(?:_\d+)?$")  # a job or one array task (sacct --jobs takes it)


# the fields of a JobStatus that are the SlurmJob's as Slurm reported them
_AS_SLURM_REPORTS = (
    "job_id", "user", "state", "raw_state", "account", "partition", "name", "nodes", "comment"
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class JobStatus:
    """One observed status of one Slurm job; ``seq`` orders every change cluster-wide."""

    job_id: str
    user: str
    state: JobState
    raw_state: str = ""
    account: str = ""
    partition: str = ""
    name: str = ""
    reason: str = ""
    exit_code: int | None = None
    nodes: str = ""
    comment: str = ""
    seq: int = 0
    observed_at: float = 0.0

    def key(self) -> tuple[Any, ...]:
        """What counts as a change (times and seq do not)."""
        return (self.state, self.raw_state, self.reason, self.exit_code, self.nodes)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "user": self.user,
            "state": self.state.value,
            "raw_state": self.raw_state,
            "account": self.account,
            "partition": self.partition,
            "name": self.name,
            "reason": self.reason,
            "exit_code": self.exit_code,
            "nodes": self.nodes,
            "comment": self.comment,
            "seq": self.seq,
            "observed_at": self.observed_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobStatus:
        code = data.get("exit_code")
        return cls(
            job_id=str(data["job_id"]),
            user=str(data.get("user") or ""),
            state=JobState(str(data.get("state") or "UNKNOWN")),
            raw_state=str(data.get("raw_state") or ""),
            account=str(data.get("account") or ""),
            partition=str(data.get("partition") or ""),
            name=str(data.get("name") or ""),
            reason=str(data.get("reason") or ""),
            exit_code=int(code) if code is not None else None,
            nodes=str(data.get("nodes") or ""),
            comment=str(data.get("comment") or ""),
            seq=int(data.get("seq") or 0),
            observed_at=float(data.get("observed_at") or 0.0),
        )

    @classmethod
    def from_slurm(cls, job: sp.SlurmJob, observed_at: float) -> JobStatus:
        reason = job.reason if job.reason not in {"", "None"} else ""
        return cls(
            **{name: getattr(job, name) for name in _AS_SLURM_REPORTS},
            reason=reason,
            exit_code=job.exit_code if job.state.terminal else None,
            observed_at=observed_at,
        )


@dataclass(frozen=True, slots=True)
class StatusView:
    """A status as one viewer may see it, with how old the cache's knowledge is."""

    status: JobStatus
    staleness_s: float
    changed: bool = True  # False: wait_change timed out and this is the current status

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.status.to_dict(),
            "staleness_s": round(self.staleness_s, 3),
            "changed": self.changed,
        }


@dataclass(slots=True)
class PollHealth:
    """How fresh the cache is; ``staleness_s`` is None before the first poll."""

    observed_at: float | None = None
    polls: int = 0  # successful polls of the scheduler by this process
    failures: int = 0
    consecutive_failures: int = 0
    last_error: str = ""

    def staleness_s(self, now: float) -> float | None:
        return None if self.observed_at is None else max(0.0, now - self.observed_at)


class StatusCache:
    """Job statuses of every user, a short history per job, and the waiters on them."""

    def __init__(
        self,
        *,
        history: int = 32,
        recent: int = 100_000,
        private_jobs: bool = True,
        retain_s: float = 86400.0,
        appear_s: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._current: dict[str, JobStatus] = {}
        self.retain_s = retain_s  # keep finished jobs this long (> Slurm's MinJobAge)
        self.appear_s = appear_s  # how long wait_change waits for an unknown job
        self._history: dict[str, deque[JobStatus]] = {}
        self._history_len = history
        self.private_jobs = private_jobs
        self.clock = clock
        self.health = PollHealth()
        self.seq = 0  # highest seq absorbed
        self._tick: asyncio.Event | None = None
        # every change absorbed lately, in seq order: what is pushed to executors
        self.recent: deque[JobStatus] = deque(maxlen=recent)
        self.on_read: Callable[[], None] | None = None  # a reader needs this cache (Poller.want)
        self.on_miss: Callable[[], None] | None = None  # ... a job it does not know (Poller.hurry)
        # who reads the cache lately (a user, or "*" for staff): their jobs' changes set
        # the poller's pace; changes of jobs nobody watches do not hurry it
        self.watchers: dict[str, float] = {}
        self.watch_s = WATCH_S

    def watch(self, user: str) -> None:
        """``user`` (``"*"``: every user) reads the cache: their jobs are watched a while."""
        self.watchers[user] = time.monotonic()

    def current(self, job_id: str) -> JobStatus | None:
        """The cache's current status of one job (no visibility check: for feeders)."""
        return self._current.get(job_id)

    def watched(self, statuses: Iterable[JobStatus]) -> int:
        """How many of ``statuses`` are of jobs someone watches."""
        cutoff = time.monotonic() - self.watch_s
        for user in [u for u, t in self.watchers.items() if t < cutoff]:
            del self.watchers[user]
        if "*" in self.watchers:
            return sum(1 for _ in statuses)
        return sum(1 for st in statuses if st.user in self.watchers)

    # -- feeding --------------------------------------------------------------------
    def diff(self, jobs: Iterable[sp.SlurmJob], observed_at: float) -> list[JobStatus]:
        """Statuses (seq 0) of the jobs that are new or changed since the cache's view."""
        out: list[JobStatus] = []
        for job in jobs:
            status = JobStatus.from_slurm(job, observed_at)
            old = self._current.get(status.job_id)
            # a status from a job event lacks the name and comment: the poll brings them
            if old is None or old.key() != status.key() or (not old.name and status.name):
                out.append(status)
        return out

    def vanished(self, jobs: Iterable[sp.SlurmJob]) -> list[str]:
        """Jobs the cache holds as active that the queue no longer lists."""
        seen = {j.job_id for j in jobs}
        return [i for i, s in self._current.items() if not s.state.terminal and i not in seen]

    def lost(self, job_id: str, observed_at: float) -> JobStatus:
        """A LOST status (seq 0) for a known job that neither queue nor accounting lists."""
        old = self._current[job_id]
        return replace(
            old,
            state=JobState.LOST,
            raw_state="",
            reason="left the queue and Slurm's accounting has no record of it",
            seq=0,
            observed_at=observed_at,
        )

    def absorb(self, statuses: Iterable[JobStatus]) -> int:
        """Take published statuses (seq > 0), idempotently; wake waiters. Returns how many."""
        n = 0
        for st in sorted(statuses, key=lambda s: s.seq):
            old = self._current.get(st.job_id)
            if st.seq <= 0 or (old is not None and st.seq <= old.seq):
                continue
            self._current[st.job_id] = st
            hist = self._history.setdefault(st.job_id, deque(maxlen=self._history_len))
            hist.append(st)
            self.recent.append(st)
            self.seq = max(self.seq, st.seq)
            n += 1
        if n:
            self._wake()
        return n

    def mark_polled(self, observed_at: float, *, by_me: bool = True) -> None:
        """The cache reflects a poll made at ``observed_at`` (``by_me``: by this
        process's poller; else by the leader replica, learnt from the store)."""
        h = self.health
        h.observed_at = max(observed_at, h.observed_at or 0.0)
        if by_me:
            h.polls += 1
            h.consecutive_failures = 0
        self.prune(observed_at)
        self._wake()

    def mark_fresh(self, at: float) -> None:
        """The cache knows every start and end up to ``at`` (a healthy job event log):
        its answers are that fresh, although the last poll is older."""
        h = self.health
        if h.observed_at is not None:  # never before a first poll: a job's queue state
            h.observed_at = max(at, h.observed_at)

    def prune(self, now: float) -> int:
        """Forget jobs that ended more than ``retain_s`` ago (bounded memory)."""
        cutoff = now - self.retain_s
        old = [i for i, s in self._current.items() if s.state.terminal and s.observed_at < cutoff]
        self.forget(old)
        return len(old)

    def mark_failed(self, error: str) -> None:
        h = self.health
        h.failures += 1
        h.consecutive_failures += 1
        h.last_error = error

    def forget(self, job_ids: Iterable[str]) -> None:
        """Drop finished jobs from memory (retention is the caller's choice)."""
        for i in job_ids:
            self._current.pop(i, None)
            self._history.pop(i, None)

    def _wake(self) -> None:
        if self._tick is not None:
            self._tick.set()
            self._tick = None

    async def wait_seq(self, since: int, timeout_s: float) -> int:
        """The cache's seq once it passed ``since`` (or at the timeout)."""
        deadline = time.monotonic() + timeout_s
        while self.seq <= since:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self._tick is None:
                self._tick = asyncio.Event()
            tick = self._tick
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(left):
                    await tick.wait()
        return self.seq

    def current_of(self, user: str) -> list[JobStatus]:
        """The current status of every job of ``user`` the cache holds, in seq order."""
        return sorted((s for s in self._current.values() if s.user == user), key=lambda s: s.seq)

    # -- reading --------------------------------------------------------------------
    def _visible(self, st: JobStatus, viewer: Viewer) -> bool:
        return viewer.is_staff or st.user == viewer.user or not self.private_jobs

    def _shown(self, st: JobStatus, viewer: Viewer) -> JobStatus:
        if viewer.is_staff or st.user == viewer.user:
            return st
        return replace(st, comment="")

    def _staleness(self) -> float:
        stale = self.health.staleness_s(self.clock())
        if stale is None:
            raise errors.Unavailable(
                "the facility's status poller has not completed a poll yet",
                hint="retry in a few seconds; `tenantry facility status` shows the poller",
            )
        return stale

    def _lookup(self, job_id: str, viewer: Viewer) -> JobStatus:
        if self.on_read is not None:
            self.on_read()
        st = self._current.get(str(job_id))
        self.watch(st.user if st is not None and self._visible(st, viewer) else viewer.user)
        if st is None or not self._visible(st, viewer):
            if st is None and self.on_miss is not None:
                self.on_miss()
            self._staleness()  # before the first poll, "unknown" is not an answer
            raise errors.NotFound(
                f"no job {job_id} of yours is known to the facility",
                hint="check the id with `tenantry jobs`; jobs of other users are not shown",
            )
        return st

    def status_of(self, job_id: str, viewer: Viewer) -> StatusView:
        """The current status of one job the viewer may see (NotFound otherwise)."""
        st = self._lookup(job_id, viewer)
        return StatusView(self._shown(st, viewer), self._staleness())

    def jobs_of(self, viewer: Viewer, *, active_only: bool = False) -> list[StatusView]:
        """Every job the viewer may see (staff: all), newest change last."""
        if self.on_read is not None:
            self.on_read()
        self.watch("*" if viewer.is_staff else viewer.user)
        stale = self._staleness()
        rows = [
            StatusView(self._shown(s, viewer), stale)
            for s in self._current.values()
            if self._visible(s, viewer) and not (active_only and s.state.terminal)
        ]
        rows.sort(key=lambda v: v.status.seq)
        return rows

    def next_change(self, job_id: str, viewer: Viewer, since: int) -> JobStatus | None:
        """The first recorded change of ``job_id`` after ``since`` (the newest if trimmed)."""
        st = self._lookup(job_id, viewer)
        if st.seq <= since:
            return None
        for h in self._history.get(st.job_id, ()):
            if h.seq > since:
                return self._shown(h, viewer)
        return self._shown(st, viewer)

    async def wait_change(
        self, job_id: str, viewer: Viewer, since: int, *, timeout_s: float | None = None
    ) -> StatusView:
        """Block until the job has a change with seq > ``since``; return the first one.

        On timeout, returns the current status with ``changed=False``. A waiter
        that passes the last ``seq`` it saw misses no change, on any replica. A
        job the cache does not know (yet), or may not show the viewer, is waited
        for up to ``appear_s`` and then raises NotFound.
        """
        start = time.monotonic()
        deadline = None if timeout_s is None else start + timeout_s
        while True:
            try:
                nxt = self.next_change(job_id, viewer, since)
            except errors.NotFound:
                # a job submitted a moment ago appears at the next poll; another
                # user's job waits just as long, so timing tells nothing either
                appear = start + self.appear_s
                if time.monotonic() >= (appear if deadline is None else min(deadline, appear)):
                    raise
                nxt = None
            if nxt is not None:
                return StatusView(nxt, self._staleness())
            if self._tick is None:
                self._tick = asyncio.Event()
            tick = self._tick
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return StatusView(self._shown(self._lookup(job_id, viewer), viewer),
                                  self._staleness(), changed=False)  # fmt: skip
            if job_id not in self._current or not self._visible(self._current[job_id], viewer):
                appear_left = start + self.appear_s - time.monotonic()
                remaining = appear_left if remaining is None else min(remaining, appear_left)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await tick.wait()


class SnapshotSource(Protocol):
    """Where the poller gets the cluster's jobs."""

    async def snapshot(self) -> list[sp.SlurmJob]: ...

    async def resolve(self, job_ids: Sequence[str]) -> list[sp.SlurmJob]: ...


class EventSource(Protocol):
    """Job events that let the poller slow down (``slurm_events.EventFeed``)."""

    since: float  # wall time from which it should have announced every start and end
    request_poll: Callable[[], None] | None

    def healthy(self) -> bool: ...

    def note_missed(self, n: int) -> None: ...

    def expect(self, job_id: str, phase: str, deadline: float) -> None: ...


class Publisher(Protocol):
    """Gives changes their seq (and, between replicas, persists and announces them)."""

    async def publish(
        self, changes: Sequence[JobStatus], observed_at: float
    ) -> list[JobStatus]: ...


@dataclass(slots=True)
class LocalPublisher:
    """Sequence numbers from a counter: one service, no replicas."""

    cache: StatusCache

    async def publish(self, changes: Sequence[JobStatus], observed_at: float) -> list[JobStatus]:
        seq = self.cache.seq
        out = []
        for ch in changes:
            seq += 1
            out.append(replace(ch, seq=seq))
        return out


class SerialPublisher:
    """One publish at a time: the poller and the job event feed share one publisher."""

    def __init__(self, inner: Publisher) -> None:
        self.inner = inner
        self._lock = asyncio.Lock()

    async def publish(self, changes: Sequence[JobStatus], observed_at: float) -> list[JobStatus]:
        async with self._lock:
            return await self.inner.publish(changes, observed_at)


@dataclass(slots=True)
class SlurmSnapshotSource:
    """``squeue`` of all users' jobs in its columns (``backends.squeue_fields``: 22.05's
    ``--json`` is twenty times the bytes and ten times squeue's CPU); ``sacct`` for the
    jobs that left the queue.

    The account running it must see every job: with PrivateData=jobs in
    slurm.conf that is SlurmUser, root or an operator (``sacctmgr add user
    tenantry adminlevel=operator``).
    """

    binaries: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 20.0
    calls: dict[str, int] = field(default_factory=dict)

    async def _run(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> tuple[int, str, str]:
        self.calls[argv[0]] = self.calls.get(argv[0], 0) + 1
        return await run_slurm_tool(
            argv,
            binaries=self.binaries,
            timeout_s=self.timeout_s,
            missing="install the Slurm client tools on the facility service's host",
            env=env,
        )

    async def snapshot(self) -> list[sp.SlurmJob]:
        rc, out, err = await self._run(squeue_fields.argv_all(), squeue_fields.client_env())
        if rc != 0:
            raise sp.error_from("squeue", err or out, rc)
        return squeue_fields.parse(out)

    async def resolve(self, job_ids: Sequence[str]) -> list[sp.SlurmJob]:
        if not job_ids:
            return []
        argv = [
            "sacct",
            "--parsable2",
            "--allocations",
            "--allusers",
            f"--format={','.join(sp.SACCT_FIELDS)}",
            f"--jobs={','.join(job_ids)}",
        ]
        rc, out, err = await self._run(argv)
        if rc != 0:
            if "accounting storage is disabled" in (err + out).lower():
                return []
            raise sp.error_from("sacct", err or out, rc)
        return [sp.sacct_row_job(r) for r in sp.parse_sacct_parsable(out)]


@dataclass(eq=False, repr=False)  # identity and the default repr, as a plain class
class Poller:
    """The loop: snapshot, diff, publish, absorb. Run it on one replica (the leader)."""

    source: SnapshotSource
    cache: StatusCache
    publisher: Publisher
    _: KW_ONLY
    interval_s: float = 1.0
    max_backoff_s: float = 10.0
    lost_after: int = 3
    # None: poll every interval_s forever. Else poll only while the cache is
    # read (a status query, a job list, a waiter's look after each poll):
    # after idle_after_s without a read the poller sleeps until the next one.
    idle_after_s: float | None = None
    # None: every interval_s. Else, like the executors' own pollers: interval_s
    # after a change, 1.5x longer after each poll without one, up to slow_s; a
    # reader asking for a job the cache does not know (just submitted) hurries it
    slow_s: float | None = None
    _missing: dict[str, int] = field(default_factory=dict, init=False)
    asleep: bool = field(default=False, init=False)  # idle: waiting for a reader
    _wanted_at: float = field(default_factory=time.monotonic, init=False)
    _wanted: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _hurry: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    watched_changes: int = field(default=0, init=False)  # of the last poll's changes
    # job events (slurmctld's, ``slurm_events``): while healthy, poll every safety_s only;
    # a start or an end it did not announce within miss_grace_s of Slurm's own time is a miss
    events: EventSource | None = None
    safety_s: float = 60.0
    miss_grace_s: float = 10.0
    _first: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        if self.idle_after_s is not None:
            self.cache.on_read = self.want
        if self.slow_s is not None or self.events is not None:
            self.cache.on_miss = self.hurry
        if self.events is not None:
            self.events.request_poll = self.hurry

    def hurry(self) -> None:
        """A reader needs a job the cache does not know yet: poll now, then fast."""
        self.want()
        self._hurry.set()

    def want(self) -> None:
        """Someone reads the cache: keep polling (wake the poller if it sleeps)."""
        self._wanted_at = time.monotonic()
        self._wanted.set()

    async def _until_wanted(self) -> None:
        idle = self.idle_after_s
        if idle is None or time.monotonic() - self._wanted_at <= idle:
            return
        self._wanted.clear()
        self.asleep = True
        try:
            await self._wanted.wait()
        finally:
            self.asleep = False

    async def poll_once(self) -> int:
        """One poll; returns how many changes it published. Errors propagate.

        A job gone from the queue is looked up in accounting; one that
        accounting does not know after ``lost_after`` polls becomes LOST. The
        pending rest of an array (``41_[4-9]``) that left the queue is dropped:
        its tasks are listed by their own ids. A failing accounting lookup is
        recorded in ``health.last_error`` and retried next poll; it does not stop
        the queue's changes from being published.
        """
        observed_at = self.cache.clock()
        jobs = await self.source.snapshot()
        gone = self.cache.vanished(jobs)
        self.cache.forget(i for i in gone if not _PLAIN_ID.match(i))
        gone = [i for i in gone if _PLAIN_ID.match(i)]
        lost: list[JobStatus] = []
        if gone:
            try:
                found = {j.job_id: j for j in await self.source.resolve(gone)}
            except errors.TenantryError as exc:
                # accounting failing must not freeze every job the queue still lists
                self.cache.health.last_error = f"accounting: {exc.message}"
                log.warning("facility poll: accounting lookup failed: %s", exc.message)
                gone, found = [], {}
            jobs = [*jobs, *(found[i] for i in gone if i in found)]
            for i in gone:
                if i in found:
                    self._missing.pop(i, None)
                    continue
                self._missing[i] = self._missing.get(i, 0) + 1
                if self._missing[i] >= self.lost_after:
                    del self._missing[i]
                    lost.append(self.cache.lost(i, observed_at))
        changes = [*self.cache.diff(jobs, observed_at), *lost]
        if self.events is not None and not self._first:
            self.events.note_missed(self._missed(changes, jobs, observed_at))
        self._first = False
        published = await self.publisher.publish(changes, observed_at)
        self.cache.absorb(published)
        self.cache.mark_polled(observed_at)
        self.watched_changes = self.cache.watched(published)
        return len(published)

    def _missed(self, changes: Sequence[JobStatus], jobs: Sequence[sp.SlurmJob], now: float) -> int:
        """Starts and ends this poll found that the job events should have announced."""
        assert self.events is not None
        since, late = self.events.since, now - self.miss_grace_s
        times = {j.job_id: j for j in jobs}
        n = 0
        for ch in changes:
            old, job = self.cache.current(ch.job_id), times.get(ch.job_id)
            if job is None:
                continue
            if ch.state is JobState.RUNNING and (old is None or old.state is JobState.PENDING):
                at = job.start_time
            elif ch.state.terminal and old is not None and old.state is JobState.RUNNING:
                at = job.end_time  # a pending job cancelled has no end event
            else:
                continue
            if at is None or at < int(since):  # Slurm's times are whole seconds
                continue
            phase = "start" if ch.state is JobState.RUNNING else "end"
            if at < late:
                n += 1
            else:  # seen before its event could be: a miss unless the event follows
                self.events.expect(ch.job_id, phase, at + self.miss_grace_s)
        return n

    def _paced(self, delay: float) -> float:
        if self.events is not None and self.events.healthy():
            return self.safety_s
        # the pace follows the jobs someone watches: another user's job starting
        # or ending on a busy cluster is not a reason to poll fast again
        if self.slow_s is None or self.watched_changes:
            return self.interval_s
        return min(self.slow_s, max(delay, self.interval_s) * 1.5)

    async def run(self) -> None:
        """Poll forever at ``interval_s``; back off (and report) while Slurm fails."""
        delay = self.interval_s
        while True:
            await self._until_wanted()
            t0 = time.monotonic()
            self._hurry.clear()
            try:
                await self.poll_once()
                delay = self._paced(delay)
            except errors.TenantryError as exc:
                self.cache.mark_failed(exc.message)
                log.warning("facility status poll failed: %s", exc.message)
                delay = min(self.max_backoff_s, delay * 2)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, delay - (time.monotonic() - t0))):
                    await self._hurry.wait()
                    delay = self.interval_s
