"""Jobs: journaled submission with dedup, one shared status cache, waiters.

Any number of agents asking for status cost the backend the same: one poller
per backend queries all active jobs in one call, adaptively (fast while jobs
change, slow when idle); ``status``, ``list`` and ``wait`` are answered from
the cache with a staleness field, and waiters wake on change.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import hashlib
import json
import logging
import os
import secrets
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tenantry.backends.base import Recoverable, Submitted
from tenantry.core.errors import (
    BackendError,
    NotFound,
    PermissionDenied,
    TenantryError,
    Unavailable,
    UsageError,
)
from tenantry.core.events import Event, EventType
from tenantry.core.models import Job, JobSpec, JobState, Principal
from tenantry.core.secrets import is_secret_file, own_home
from tenantry.core.tasks import TaskGroup
from tenantry.jobs.environment import job_environment

if TYPE_CHECKING:
    from tenantry.backends.base import JobUpdate
    from tenantry.service.runtime import Runtime

log = logging.getLogger(__name__)

LOST_AFTER_MISSES = 3
CANCEL_SETTLE_S = 5.0
LOG_CAP = 65536


def _placement(job: Job, upd: JobUpdate) -> tuple[str, str]:
    """Node list and partition as the backend reports them (kept once known)."""
    extra = upd.extra or {}
    nodes = str(extra.get("nodes") or "") or job.nodes
    if nodes in {"None assigned", "(null)"}:
        nodes = job.nodes
    partition = job.resources.partition or str(extra.get("partition") or "")
    return nodes, partition


def spec_hash(spec: JobSpec) -> str:
    """What dedup compares: script content, arguments, options and cwd (not env)."""
    d = spec.to_dict()
    for k in ("env", "force", "script"):
        d.pop(k, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()


def output_for(spec: JobSpec, job_id: str) -> JobSpec:
    """The spec with its output named by Tenantry's id by default, refused if unwritable.

    No ``--output``: ``<cwd>/tenantry-<id>.out`` (``tenantry-t11.out``), for an
    array one file per task (``tenantry-t11_%a.out``). A pattern keeps the
    scheduler's meaning of ``%j`` and friends.
    """
    import dataclasses
    import os

    if not spec.output:
        name = f"tenantry-{job_id}_%a.out" if spec.array else f"tenantry-{job_id}.out"
        spec = dataclasses.replace(spec, output=name)
    if not os.path.isdir(spec.cwd):
        return spec  # not on this machine's file system: the backend judges the paths
    for pattern in (spec.output, spec.error):
        if not pattern:
            continue
        path = pattern if os.path.isabs(pattern) else os.path.join(spec.cwd, pattern)
        parent = os.path.dirname(path) or "."
        if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
            raise UsageError(
                f"the job could not write its output: {parent} is not a writable directory",
                hint="submit from a directory you can write, or pass --output PATH",
            )
    return spec


class JobService:
    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.backend = runtime.backend
        self.cache: dict[str, Job] = {}
        self._by_backend: dict[str, str] = {}
        self._misses: dict[str, int] = {}
        self._changed: dict[str, asyncio.Event] = {}
        self._wake = asyncio.Event()
        self._soon: asyncio.TimerHandle | None = None  # the poll a submission asked for
        self._task: asyncio.Task[None] | None = None
        self.tasks = TaskGroup("jobs")
        self._requests: dict[tuple[int, str], asyncio.Lock] = {}
        # journaled jobs whose recovery could not ask the backend yet
        self._unrecovered: list[Job] = []
        self.last_ok: float = 0.0
        self.last_error: str = ""
        self.interval = runtime.settings.poll_fast_s
        self.polls = 0
        self.served = 0

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        journal = self.rt.journal
        mine = self.backend.name
        for job in await journal.list_jobs(active_only=True, limit=100_000):
            # jobs of another backend are left alone (never polled, never LOST):
            # the daemon serving their backend follows them
            if job.backend_id and job.backend == mine:
                self._remember(job)
        self.last_ok = time.time()
        if hasattr(self.backend, "notify"):
            self.backend.notify = self._wake.set
        for job in await journal.unhanded_jobs():
            if job.backend == mine:
                await self._resubmit(job)
        # supervised: a poller that died would freeze every job's state unnoticed
        self._task = self.tasks.supervise("status-poller", self._poll_loop)

    async def aclose(self) -> None:
        if self._soon is not None:
            self._soon.cancel()
        await self.tasks.aclose()

    def _poll_soon(self) -> None:
        """A job was handed to the backend: poll within ``poll_fast_s`` of now.

        Not at once: the job is in the cache as submitted, the answer to the
        submission does not wait behind a status query, and a burst of
        submissions shares one query instead of costing one each."""
        if self._soon is None:
            self._soon = asyncio.get_running_loop().call_later(
                float(self.rt.settings.poll_fast_s), self._poll_now
            )

    def _poll_now(self) -> None:
        self._soon = None
        self._wake.set()

    async def _hand(self, spec: JobSpec, p: Principal, job_id: str, intent: str) -> Submitted:
        spec = output_for(spec, job_id)  # named by Tenantry's id, on a first or a resubmission
        if isinstance(self.backend, Recoverable):
            return await self.backend.submit(spec, p, job_id, intent=intent)
        return await self.backend.submit(spec, p, job_id)

    async def _resubmit(self, job: Job) -> None:
        """A job journaled but never marked handed (the daemon died in between).

        The backend may have it already (the crash came after it acted): ask it
        first, by the job's intent token, and submit only when it has none.
        """
        found = await self.rt.journal.job_spec(job.id)
        if found is None:
            return
        spec, _ = found
        p = self._principal_of(job)
        intent = await self.rt.journal.job_intent(job.id)
        try:
            existing = None
            if isinstance(self.backend, Recoverable):
                existing = await self.backend.find(spec, p, job.id, intent)
            if existing is not None:
                await self._adopt(job, existing, "found at the backend after a daemon restart")
                return
            sub = await self._hand(spec, p, job.id, intent)
        except Unavailable as exc:
            # unknown whether the backend has it: try again on the next start
            log.warning("job %s: cannot check the backend after a restart: %s", job.id, exc)
            self.last_error = exc.message
            self._unrecovered.append(job)
            return
        except TenantryError as exc:
            job.state, job.reason = (
                JobState.LOST,
                f"could not be resubmitted after a restart: {exc}",
            )
            job.ended_at = job.updated_at = time.time()
            await self.rt.journal.update_job(job)
            await self.rt.journal.mark_handed(job.id, "", "", "")
            return
        await self._adopt(job, sub, "resubmitted after a daemon restart")

    async def _adopt(self, job: Job, sub: Submitted, reason: str) -> None:
        await self.rt.journal.mark_handed(job.id, sub.backend_id, sub.output, sub.error)
        job.backend_id, job.output, job.error = sub.backend_id, sub.output, sub.error
        job.reason = reason
        self._remember(job)
        outcome = "resubmitted" if reason.startswith("resubmitted") else "found"
        await self.rt.emit(Event(EventType.JOB_RECOVERED, job.principal, job.id, outcome))

    @staticmethod
    def _principal_of(job: Job) -> Principal:
        user, _, rest = job.principal.partition("/")
        agent, _, session = rest.partition("/")
        return Principal.from_dict(
            {
                "uid": job.uid,
                "user": user,
                "agent": agent or "human",
                "session": "" if session == "-" else session,
            }
        )

    def _remember(self, job: Job) -> None:
        self.cache[job.id] = job
        if job.backend_id:
            self._by_backend[job.backend_id] = job.id
        self._changed.setdefault(job.id, asyncio.Event())

    # -- the poller -------------------------------------------------------------------
    def _active(self) -> list[Job]:
        return [j for j in self.cache.values() if not j.state.terminal and j.backend_id]

    async def _poll_loop(self) -> None:
        s = self.rt.settings
        while True:
            active = self._active()
            timeout = self.interval if active else s.poll_slow_s
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()
            self._wake.clear()
            if self._unrecovered:
                retry, self._unrecovered = self._unrecovered, []
                for job in retry:
                    await self._resubmit(job)
            active = self._active()
            if not active:
                self.last_ok = time.time()
                continue
            changed = await self.poll_once(active)
            if changed:
                self.interval = s.poll_fast_s
            else:
                self.interval = min(s.poll_slow_s, self.interval * 1.5)

    async def poll_once(self, active: list[Job] | None = None) -> int:
        """Query the backend once for all active jobs; returns how many changed."""
        active = self._active() if active is None else active
        ids = [j.backend_id for j in active]
        t0 = time.time()
        try:
            updates = await self.backend.query(ids)
        except Unavailable as exc:
            self.last_error = exc.message
            await self.rt.emit(
                Event(
                    EventType.BACKEND_POLL,
                    "",
                    "",
                    "error",
                    time.time() - t0,
                    {"jobs": len(ids), "error": exc.message},
                )
            )
            return 0
        except TenantryError as exc:
            self.last_error = exc.message
            log.warning("status poll failed: %s", exc)
            return 0
        self.polls += 1
        self.last_ok = time.time()
        self.last_error = ""
        await self.rt.emit(
            Event(EventType.BACKEND_POLL, "", "", "ok", self.last_ok - t0, {"jobs": len(ids)})
        )
        changed = 0
        for job in active:
            upd = updates.get(job.backend_id)
            if upd is None:
                self._misses[job.id] = self._misses.get(job.id, 0) + 1
                if self._misses[job.id] < LOST_AFTER_MISSES:
                    continue
                upd_state, reason = JobState.LOST, "the scheduler no longer knows this job"
                await self._apply(job, None, upd_state, reason)
                changed += 1
                continue
            self._misses.pop(job.id, None)
            if self._differs(job, upd):
                await self._apply(job, upd, upd.state, upd.reason)
                changed += 1
        return changed

    @staticmethod
    def _differs(job: Job, upd: JobUpdate) -> bool:
        return (
            job.state is not upd.state
            or job.exit_code != upd.exit_code
            or (
                upd.started_at is not None
                and upd.state is not JobState.PENDING
                and job.started_at != upd.started_at
            )
            or (upd.ended_at is not None and job.ended_at != upd.ended_at)
            or _placement(job, upd) != (job.nodes, job.resources.partition)
        )

    async def _apply(self, job: Job, upd: JobUpdate | None, state: JobState, reason: str) -> None:
        old = job.state
        job.state = state
        job.reason = reason or job.reason
        if upd is not None:
            job.exit_code = upd.exit_code
            # a pending Slurm job's start time is the scheduler's forecast, not
            # a start: keeping it would show a negative elapsed time
            if state is not JobState.PENDING:
                job.started_at = upd.started_at or job.started_at
            job.ended_at = upd.ended_at or job.ended_at
            nodes, partition = _placement(job, upd)
            job.nodes = nodes
            if partition != job.resources.partition:
                job.resources = dataclasses.replace(job.resources, partition=partition)
        if state.terminal and job.ended_at is None:
            job.ended_at = time.time()
        job.updated_at = time.time()
        await self.rt.journal.update_job(job)
        if old is not state:
            await self.rt.emit(
                Event(
                    EventType.JOB_STATE,
                    job.principal,
                    job.id,
                    state.value,
                    None,
                    {
                        "backend_id": job.backend_id,
                        "exit_code": job.exit_code,
                        "reason": job.reason,
                        "resources": job.resources.to_dict(),
                        "elapsed_s": (job.ended_at or time.time())
                        - (job.started_at or time.time()),
                    },
                )
            )
        ev = self._changed.setdefault(job.id, asyncio.Event())
        ev.set()
        self._changed[job.id] = asyncio.Event()

    # -- use cases --------------------------------------------------------------------
    async def submit(
        self, p: Principal, spec: JobSpec, request_id: str = ""
    ) -> tuple[Job, bool, str]:
        """Journal, then hand to the backend; returns (job, existing, note).

        A retried request (same client ``request_id``) returns the job the first
        attempt created; so does a duplicate within the dedup window unless the
        earlier job ended in failure.
        """
        if not request_id:
            return await self._submit(p, spec, "")
        # one attempt per request id at a time: a retry that overtakes the first
        # attempt waits for it and then returns its job
        key = (p.uid, request_id)
        lock = self._requests.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                return await self._submit(p, spec, request_id)
        finally:
            if not lock.locked():
                self._requests.pop(key, None)

    async def _submit(self, p: Principal, spec: JobSpec, request_id: str) -> tuple[Job, bool, str]:
        if request_id:
            first = await self.rt.journal.job_by_request(p.uid, request_id)
            if first is not None:
                job = self.cache.get(first.id, first)
                note = (
                    f"existing job {job.id}: this request ({request_id}) was already "
                    "received; returning the job it created"
                )
                return job, True, note
        spec = dataclasses.replace(spec, env=job_environment(spec.env))
        h = spec_hash(spec)
        now = time.time()
        if not spec.force:
            dup = await self.rt.journal.find_duplicate(
                p.key, h, now - self.rt.settings.dedup_window_s
            )
            # the cache may know the job failed before the journal's row says so
            known = self.cache.get(dup.id, dup) if dup is not None else None
            if known is not None and known.state.reusable:
                await self.rt.emit(Event(EventType.JOB_DEDUPLICATED, p.key, known.id, "ok"))
                note = (
                    f"existing job {known.id}: identical to the job submitted "
                    f"{now - known.submitted_at:.0f} s ago "
                    "(same script, arguments, options and cwd); returning it. "
                    "Pass force=true (--force) to submit again."
                )
                return known, True, note
        job = Job(
            id="",
            backend=self.backend.name,
            backend_id="",
            state=JobState.PENDING,
            principal=p.key,
            uid=p.uid,
            name=spec.name or Path(spec.script).name,
            submitted_at=now,
            resources=spec.resources,
            updated_at=now,
            cwd=spec.cwd,
        )
        intent = secrets.token_hex(8)
        job = await self.rt.journal.journal_job(job, spec, h, request_id=request_id, intent=intent)
        try:
            sub = await self._hand(spec, p, job.id, intent)
        except TenantryError as exc:
            await self.rt.journal.forget_job(job.id)
            if isinstance(exc, BackendError | UsageError):
                await self.rt.emit(
                    Event(
                        EventType.JOB_REJECTED,
                        p.key,
                        "",
                        "rejected",
                        None,
                        {
                            "error": exc.message,
                            "script": spec.script,
                            "resources": spec.resources.to_dict(),
                            "cwd": spec.cwd,
                        },
                    )
                )
            raise
        await self.rt.journal.mark_handed(job.id, sub.backend_id, sub.output, sub.error)
        job.backend_id, job.output, job.error = sub.backend_id, sub.output, sub.error
        self._remember(job)
        self._poll_soon()
        await self.rt.emit(
            Event(
                EventType.JOB_SUBMITTED,
                p.key,
                job.id,
                "ok",
                None,
                {
                    "backend_id": job.backend_id,
                    "name": job.name,
                    "resources": spec.resources.to_dict(),
                    "script": spec.script,
                    "cwd": spec.cwd,
                },
            )
        )
        return job, False, ""

    async def get(self, p: Principal, ref: str) -> Job:
        ref = str(ref).strip()
        if not ref:
            raise UsageError("empty job id")
        jid = ref if ref in self.cache else self._by_backend.get(ref)
        job = self.cache.get(jid) if jid else None
        if job is None:
            job = await self.rt.journal.get_job(ref)
        if job is None or job.uid != p.uid:
            raise NotFound(
                f"no job {ref!r} of yours is known to Tenantry",
                hint="list your jobs with `tenantry jobs` (list_jobs over MCP)",
            )
        return job

    def staleness(self, job: Job) -> float:
        if job.state.terminal:
            return 0.0
        return max(0.0, time.time() - self.last_ok)

    def view(self, job: Job) -> dict[str, Any]:
        d = job.to_dict()
        d["staleness_s"] = round(self.staleness(job), 3)
        d["stale"] = bool(self.last_error) and not job.state.terminal
        if d["stale"]:
            d["stale_reason"] = self.last_error
        return d

    async def status(self, p: Principal, refs: list[str]) -> list[dict[str, Any]]:
        self.served += 1
        jobs = [await self.get(p, r) for r in refs]
        await self.rt.emit(
            Event(
                EventType.STATUS_QUERY,
                p.key,
                ",".join(j.id for j in jobs),
                "ok",
                None,
                {"served_from": "cache", "jobs": len(jobs)},
            )
        )
        return [self.view(j) for j in jobs]

    async def list(
        self, p: Principal, *, all_sessions: bool, states: list[str], limit: int
    ) -> list[dict[str, Any]]:
        self.served += 1
        jobs = await self.rt.journal.list_jobs(
            uid=p.uid, principal=None if all_sessions else p.key, states=states, limit=limit
        )
        await self.rt.emit(
            Event(
                EventType.STATUS_QUERY,
                p.key,
                "",
                "ok",
                None,
                {"served_from": "cache", "jobs": len(jobs)},
            )
        )
        return [self.view(self.cache.get(j.id, j)) for j in jobs]

    async def wait(
        self, p: Principal, ref: str, timeout: float | None, heartbeat_s: float = 5.0
    ) -> AsyncIterator[dict[str, Any]]:
        """Yield progress dicts while waiting; the last has ``done`` set."""
        job = await self.get(p, ref)
        self.served += 1
        await self.rt.emit(
            Event(
                EventType.STATUS_QUERY,
                p.key,
                job.id,
                "ok",
                None,
                {"served_from": "cache", "jobs": 1, "kind": "wait"},
            )
        )
        deadline = None if timeout is None else time.monotonic() + timeout
        started = time.monotonic()
        while not job.state.terminal:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                yield {"done": True, "timed_out": True, "job": self.view(job)}
                return
            ev = self._changed.setdefault(job.id, asyncio.Event())
            wait_for = heartbeat_s if remaining is None else min(heartbeat_s, remaining)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait_for):
                    await ev.wait()
            job = self.cache.get(job.id, job)
            yield {
                "done": False,
                "state": job.state.value,
                "elapsed_s": round(time.monotonic() - started, 1),
            }
        yield {"done": True, "timed_out": False, "job": self.view(job)}

    async def cancel(self, p: Principal, ref: str) -> Job:
        job = await self.get(p, ref)
        if job.state.terminal:
            return job
        await self.backend.cancel(job.backend_id)
        await self.rt.emit(Event(EventType.JOB_CANCELLED, p.key, job.id, "ok"))
        # answer with the state after the cancel (a scheduler takes a moment)
        deadline = time.monotonic() + CANCEL_SETTLE_S
        while True:
            await self.poll_once([self.cache.get(job.id, job)])
            job = self.cache.get(job.id, job)
            if job.state.terminal or time.monotonic() >= deadline:
                return job
            ev = self._changed.setdefault(job.id, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(1.0):
                    await ev.wait()

    async def logs(
        self, p: Principal, ref: str, tail: int = 200, stream: str = "stdout", task: str = ""
    ) -> dict[str, Any]:
        job = await self.get(p, ref)
        if stream not in {"stdout", "stderr"}:
            raise UsageError("stream must be stdout or stderr")
        path = job.output if stream == "stdout" or not job.error else job.error
        if not path:
            raise NotFound(f"job {job.id} has no {stream} file recorded")
        if "%a" in path:
            if task:
                if not task.isdigit():
                    raise UsageError(f"array task {task!r} is not a number")
                path = path.replace("%a", task)
            else:
                return self._array_logs(job, path, tail)
        elif task:
            raise UsageError(
                f"job {job.id} has one {stream} file for all its tasks ({path})",
                hint="read it without --task; submit with --output 'name_%a.out' for one per task",
            )
        out = self._read_tail(path, tail)
        out["job"] = job.id
        return out

    def _array_logs(self, job: Job, pattern: str, tail: int) -> dict[str, Any]:
        """Every task's output of an array job, in task order, each under a header."""
        head, _, rest = pattern.partition("%a")
        base = Path(head).parent
        prefix, suffix = Path(head).name, rest
        found: list[tuple[int, Path]] = []
        with contextlib.suppress(OSError):
            for f in base.iterdir():
                name = f.name
                if name.startswith(prefix) and name.endswith(suffix):
                    middle = name[len(prefix) : len(name) - len(suffix)]
                    if middle.isdigit():
                        found.append((int(middle), f))
        parts: list[str] = []
        size = lines = 0
        truncated = False
        for n, f in sorted(found):
            one = self._read_tail(str(f), tail)
            parts.append(f"==> task {n}: {f} <==\n{one['text']}")
            size += int(one["size"])
            lines += int(one["lines"])
            truncated = truncated or bool(one.get("truncated"))
        out: dict[str, Any] = {
            "job": job.id,
            "path": pattern,
            "tasks": [n for n, _ in sorted(found)],
            "size": size,
            "lines": lines,
            "text": "\n".join(parts),
            "truncated": truncated,
            "origin": "job-output",
            "untrusted": True,
        }
        if not found:
            out["note"] = "no task has written output yet"
        return out

    @staticmethod
    def _read_tail(path: str, tail: int) -> dict[str, Any]:
        if is_secret_file(os.path.realpath(path), own_home()):
            raise PermissionDenied(
                f"{path} resolves to a credential file: a job's output is not read there",
                hint="Slurm writes output to a regular file; see where the link points",
            )
        try:
            # a regular file Slurm wrote, never a link planted in its place
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as f:
                f.seek(0, 2)
                size = f.tell()
                f.seek(max(0, size - LOG_CAP))
                data = f.read()
        except FileNotFoundError:
            return {
                "path": path,
                "text": "",
                "lines": 0,
                "size": 0,
                "note": "the output file does not exist yet",
                "origin": "job-output",
            }
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise UsageError(
                    f"{path} is a symbolic link: Tenantry reads job output only from the file"
                    " Slurm wrote",
                    hint="read the link's target yourself, or give the job a real --output",
                ) from exc
            raise UsageError(f"cannot read {path}: {exc.strerror}") from exc
        lines = data.decode("utf-8", errors="replace").splitlines()
        cut = tail > 0 and len(lines) > tail
        if cut:
            lines = lines[-tail:]
        return {
            "path": path,
            "size": size,
            "lines": len(lines),
            "text": "\n".join(lines),
            "truncated": size > len(data) or cut,
            "origin": "job-output",
            "untrusted": True,
        }
