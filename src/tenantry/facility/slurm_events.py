"""Job events from slurmctld: the cluster poller's cache learns starts and ends at once.

slurmctld runs ``slurm/slurm_event.sh`` as SlurmUser when a job starts
(``PrologSlurmctld``) and when it ends (``EpilogSlurmctld``, or
``jobcomp/script``); the script appends one line to the job event log::

    v1 1796180542.06 start job=5 array= user=al state=RUNNING exit= nodes=n1 partition=p account=a
    v1 1796180587.91 end job=9 array=8_1 user=al state=ENDED exit=0:0 nodes=n1 partition=p account=a

:class:`EventFeed` tails that log and feeds the poller's :class:`StatusCache`:
a start becomes RUNNING with no request to Slurm; an end carries no state
under ``EpilogSlurmctld`` (a cancelled job exits 0:0 too), so it is asked of
accounting (``sacct``, slurmdbd, not the controller), and what accounting
cannot answer yet is left to one poll of the controller. While the feed is
healthy the poller polls only as a safety net (``facility_safety_poll_s``).

Trust (an agent must not forge a job's end): the log is read only while it is
a regular file owned by SlurmUser or root, writable by its owner alone, in a
directory that only SlurmUser or root may write; otherwise nothing of it is
read and the feed is unhealthy, so the poller keeps its normal pace. So is a
feed that missed something: a safety poll that finds a start or an end the
log did not announce (``note_missed``) brings the normal pace back until the
log delivers again.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from tenantry.backends.slurm_parse import map_state
from tenantry.core import errors
from tenantry.core.models import JobState
from tenantry.core.tasks import every
from tenantry.facility.poller import JobStatus, Publisher, SnapshotSource, StatusCache

__all__ = ["EventFeed", "EventLog", "SlurmEvent", "event_log", "parse_line"]

log = logging.getLogger(__name__)

MAX_READ = 1 << 20  # bytes of the log read per check (a burst is read over a few checks)
_FIELDS = ("job", "array", "user", "state", "exit", "nodes", "partition", "account")
FRESH_EVERY_S = 2.0  # a healthy feed tells the publisher (replicas' shared log) this often
ENDED = "ENDED"  # EpilogSlurmctld: the job ended, its state is accounting's to say


@dataclass(frozen=True, slots=True)
class SlurmEvent:
    """One line of the job event log."""

    at: float
    phase: str  # "start" or "end"
    job_id: str  # "42", or "41_3" for an array task (as squeue names it)
    user: str
    state: JobState | None  # None: ended, state not known yet (ask accounting)
    exit_code: int | None = None
    nodes: str = ""
    partition: str = ""
    account: str = ""


def _exit_code(raw: str) -> int | None:
    head = raw.split(":", 1)[0]
    return int(head) if head.isdigit() else None


def parse_line(line: str) -> SlurmEvent | None:
    """One event, or None for a line that is not one (never raises)."""
    parts = line.split()
    if len(parts) != 3 + len(_FIELDS) or parts[0] != "v1" or parts[2] not in ("start", "end"):
        return None
    try:
        at = float(parts[1])
    except ValueError:
        return None
    kv: dict[str, str] = {}
    for token, name in zip(parts[3:], _FIELDS, strict=True):
        key, sep, value = token.partition("=")
        if key != name or not sep:
            return None
        kv[name] = value
    job_id = kv["array"] or kv["job"]
    if not job_id.replace("_", "").isdigit() or not kv["user"]:
        return None
    raw = kv["state"].upper()
    if parts[2] == "start":
        state: JobState | None = JobState.RUNNING
    elif raw == ENDED:
        state = None
    else:
        state = map_state(raw)
        if not state.terminal:
            return None
    return SlurmEvent(
        at=at,
        phase=parts[2],
        job_id=job_id,
        user=kv["user"],
        state=state,
        exit_code=_exit_code(kv["exit"]),
        nodes=kv["nodes"],
        partition=kv["partition"],
        account=kv["account"],
    )


class EventLog:
    """Reads the lines appended to the log since the last read, while it is trusted.

    A log replaced (a new inode) or truncated is read again from its start; a
    line not yet ended by a newline waits for the next read.
    """

    def __init__(self, path: str, trusted_uids: Iterable[int]) -> None:
        self.path = path
        self.trusted_uids = frozenset(trusted_uids) | {0}
        self.trusted = False
        self.why = "not read yet"
        self.refused = 0  # reads refused because the log or its directory is not trusted
        self._ino: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""

    def _refuse(self, why: str) -> list[str]:
        if self.trusted or why != self.why:
            log.warning("job event log %s not trusted: %s", self.path, why)
        self.trusted, self.why = False, why
        self.refused += 1
        return []

    def _untrusted(self, st: os.stat_result, what: str) -> str:
        if st.st_uid not in self.trusted_uids:
            return f"{what} is owned by uid {st.st_uid}, not SlurmUser or root"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{what} may be written by others than its owner"
        return ""

    def read_lines(self, *, skip: bool = False) -> list[str]:
        """The complete lines appended since the last read ([] if not trusted).

        ``skip``: read nothing, start from what is appended from now on (the
        first poll of the service sees what the log said before it started).
        """
        directory = os.path.dirname(os.path.abspath(self.path))
        try:
            dst = os.stat(directory)
        except OSError as exc:
            return self._refuse(f"its directory: {exc.strerror}")
        why = self._untrusted(dst, "its directory")
        if why:
            return self._refuse(why)
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return self._refuse("it is a symbolic link")
            return self._refuse(exc.strerror or str(exc))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return self._refuse("it is not a regular file")
            why = self._untrusted(st, "it")
            if why:
                return self._refuse(why)
            ino = (st.st_dev, st.st_ino)
            if skip:
                self._ino, self._offset, self._partial = ino, st.st_size, b""
            elif ino != self._ino or st.st_size < self._offset:
                self._ino, self._offset, self._partial = ino, 0, b""
            data = os.pread(fd, MAX_READ, self._offset) if st.st_size > self._offset else b""
        finally:
            os.close(fd)
        if not self.trusted:
            log.info("job event log %s trusted", self.path)
        self.trusted, self.why = True, ""
        self._offset += len(data)
        data = self._partial + data
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        return data[:cut].decode("utf-8", "replace").splitlines()


def event_log(path: str, slurm_user: str) -> EventLog | None:
    """The log named by ``facility_slurm_events`` (None: not configured), trusted while
    ``slurm_user`` (``facility_slurm_user``) or root owns it."""
    if not path:
        return None
    import pwd

    try:
        uids = {pwd.getpwnam(slurm_user).pw_uid} if slurm_user else set()
    except KeyError:
        log.warning("facility_slurm_user %r is not a user here: only root may own the log",
                    slurm_user)  # fmt: skip
        uids = set()
    return EventLog(path, uids)


def _started(ev: SlurmEvent, old: JobStatus | None) -> JobStatus:
    base = old or JobStatus(job_id=ev.job_id, user=ev.user, state=JobState.RUNNING)
    return replace(
        base,
        user=ev.user,
        state=JobState.RUNNING,
        raw_state="RUNNING",
        reason="",
        exit_code=None,
        nodes=ev.nodes or base.nodes,
        partition=ev.partition or base.partition,
        account=ev.account or base.account,
        seq=0,
        observed_at=ev.at,
    )


def _ended(ev: SlurmEvent, old: JobStatus | None, state: JobState) -> JobStatus:
    return replace(
        _started(ev, old),
        state=state,
        raw_state=state.value,
        exit_code=ev.exit_code,
        observed_at=ev.at,
    )


class EventFeed:
    """The job event log into the cache; says whether the poller may slow down."""

    def __init__(
        self,
        events: EventLog,
        cache: StatusCache,
        publisher: Publisher,
        source: SnapshotSource,
        *,
        check_s: float = 0.25,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.log = events
        self.cache = cache
        self.publisher = publisher
        self.source = source
        self.check_s = check_s
        self.clock = clock
        self.since = clock()  # transitions before this are the first poll's to find
        self.request_poll: Callable[[], None] | None = None  # the poller's hurry
        self.events = 0
        self.applied = 0
        self.to_poll = 0  # ends accounting could not resolve: left to a poll
        self.missed = 0  # starts and ends a safety poll found first
        self._missed_at: float | None = None
        self._event_at: float | None = None
        # starts and ends a poll saw first: each is a miss unless its event comes in time
        self._expected: dict[tuple[str, str], float] = {}
        self._told_fresh = 0.0

    def healthy(self) -> bool:
        """Trusted, and it delivered since the last thing it missed."""
        if not self.log.trusted:
            return False
        return self._missed_at is None or (
            self._event_at is not None and self._event_at > self._missed_at
        )

    def note_missed(self, n: int) -> None:
        """A poll found ``n`` starts or ends the log should have announced."""
        if n <= 0:
            return
        self.missed += n
        if self.healthy():
            log.warning("job event log missed %d job start(s)/end(s): polling at full pace", n)
        self._missed_at = time.monotonic()

    def expect(self, job_id: str, phase: str, deadline: float) -> None:
        """A poll saw ``job_id`` start or end (``phase``) a moment ago: its event is due by
        ``deadline`` (wall time)."""
        if len(self._expected) < 100_000:
            self._expected[(job_id, phase)] = deadline

    def _overdue(self, events: list[SlurmEvent]) -> int:
        for ev in events:
            self._expected.pop((ev.job_id, ev.phase), None)
        now = self.clock()
        late = [k for k, deadline in self._expected.items() if deadline < now]
        for k in late:
            del self._expected[k]
        return len(late)

    def health(self) -> dict[str, Any]:
        return {
            "path": self.log.path,
            "trusted": self.log.trusted,
            "why": self.log.why,
            "healthy": self.healthy(),
            "events": self.events,
            "applied": self.applied,
            "left_to_poll": self.to_poll,
            "missed": self.missed,
            "refused_reads": self.log.refused,
        }

    async def step(self) -> int:
        """Read what the log gained; returns how many changes it published."""
        was = self.healthy()
        parsed = [ev for ev in map(parse_line, self.log.read_lines()) if ev is not None]
        if parsed:
            self.events += len(parsed)
            self._event_at = time.monotonic()
        n = await self.apply(parsed) if parsed else 0
        self.note_missed(self._overdue(parsed))
        if self.healthy():
            now = self.clock()
            if now - self._told_fresh >= FRESH_EVERY_S:
                # replicas: the shared log's freshness, so followers answer from it too
                await self.publisher.publish([], now)
                self._told_fresh = now
            self.cache.mark_fresh(now)
        elif was and self.request_poll is not None:
            self.request_poll()  # no longer trusted: the poller resumes its pace now
        return n

    async def apply(self, events: list[SlurmEvent]) -> int:
        changes: list[JobStatus] = []
        ask: list[SlurmEvent] = []
        for ev in events:
            old = self.cache.current(ev.job_id)
            if old is not None and old.state.terminal:
                continue  # an end is final; a start read after its end changes nothing
            if ev.phase == "start":
                if old is None or old.state is not JobState.RUNNING:
                    changes.append(_started(ev, old))
            elif ev.state is not None:
                changes.append(_ended(ev, old, ev.state))
            else:
                ask.append(ev)
        if ask:
            changes.extend(await self._resolve(ask))
        published = await self.publisher.publish(changes, self.clock())
        self.applied += self.cache.absorb(published)
        return len(published)

    async def _resolve(self, ended: list[SlurmEvent]) -> list[JobStatus]:
        found: dict[str, Any] = {}
        with contextlib.suppress(errors.TenantryError):
            found = {j.job_id: j for j in await self.source.resolve([e.job_id for e in ended])}
        out = []
        for ev in ended:
            job = found.get(ev.job_id)
            if job is not None and job.state.terminal:
                out.append(replace(JobStatus.from_slurm(job, ev.at), user=job.user or ev.user))
            else:
                self.to_poll += 1
        if len(out) < len(ended) and self.request_poll is not None:
            self.request_poll()  # one poll of the controller for whatever accounting lacks
        return out

    async def run(self) -> None:
        self.log.read_lines(skip=True)
        self.since = self.clock()
        await every(self.check_s, self.step, log, "job event log", first_now=True)
