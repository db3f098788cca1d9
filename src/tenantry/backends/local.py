"""The local backend (embedded default): batch jobs as local processes.

Jobs wait in a FIFO queue and start when enough CPU slots are free. Each job
has a directory ``<state>/local/jobs/<id>/`` with its script, ``job.json`` and
the ``status.json`` written by the wrapper (``local_job``), so the queue and
the true end state of every job survive a daemon crash: on ``start`` queued
jobs are queued again and running ones are re-attached by pid.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tenantry.backends.base import JobUpdate, Submitted
from tenantry.backends.local_job import write_status
from tenantry.core.errors import NotFound, SubmissionRejected, UsageError
from tenantry.core.models import JobSpec, JobState, Principal
from tenantry.core.tasks import TaskGroup


@dataclass
class _Entry:
    id: str
    dir: Path
    cpus: int
    state: JobState
    pid: int | None = None
    exit_code: int | None = None
    started_at: float | None = None
    ended_at: float | None = None
    reason: str = ""

    def update(self) -> JobUpdate:
        return JobUpdate(
            self.id,
            self.state,
            exit_code=self.exit_code,
            started_at=self.started_at,
            ended_at=self.ended_at,
            reason=self.reason,
            # what squeue/sacct show: the one partition (see ``info``) and this host
            extra={
                "partition": "local",
                "nodes": socket.gethostname().split(".")[0] if self.started_at else "",
            },
        )


def _pid_is_wrapper(pid: int, job_dir: Path) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"tenantry.backends.local_job" in cmdline and str(job_dir).encode() in cmdline


def _find_wrapper(job_dir: Path) -> int | None:
    """The pid of the wrapper running ``job_dir``, found by scanning /proc."""
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and _pid_is_wrapper(int(proc.name), job_dir):
            return int(proc.name)
    return None


class LocalBackend:
    name = "local"

    def __init__(self, state_dir: str | Path, slots: int = 0) -> None:
        self.root = Path(state_dir) / "local" / "jobs"
        self.slots = slots or os.cpu_count() or 1
        self._jobs: dict[str, _Entry] = {}
        self._queue: list[str] = []
        self._tasks = TaskGroup("local-backend")
        self._next = 1
        # Tenantry job id -> local job id, for recovery (``find``)
        self._by_tenantry: dict[str, str] = {}
        self.calls = 0
        # set by the job service: called whenever a job changes state
        self.notify: Callable[[], None] | None = None

    # -- lifecycle --------------------------------------------------------------------
    async def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        ids = sorted(int(p.name) for p in self.root.iterdir() if p.name.isdigit())
        self._next = (ids[-1] + 1) if ids else 1
        for n in ids:
            self._recover(str(n))
        self._schedule()

    def _recover(self, jid: str) -> None:
        d = self.root / jid
        try:
            job = json.loads((d / "job.json").read_text())
        except (OSError, ValueError):
            return
        e = _Entry(jid, d, int(job.get("cpus", 1)), JobState.PENDING)
        self._jobs[jid] = e
        if job.get("tenantry_id"):
            self._by_tenantry[str(job["tenantry_id"])] = jid
        status = self._read_status(d)
        if status is None:
            self._queue.append(jid)  # never started: queue it again
            return
        self._apply(e, status)
        if e.state is JobState.RUNNING:
            if not e.pid:
                e.pid = _find_wrapper(d)
            if e.pid and _pid_is_wrapper(e.pid, d):
                self._spawn_task(self._watch_adopted(e))
            else:
                e.state = JobState.LOST
                e.ended_at = time.time()
                e.reason = "the job's process vanished while the daemon was down"
                write_status(d, self._status_of(e))

    async def aclose(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await t
        # Running jobs keep running in their own sessions; the next daemon re-attaches.

    # -- verbs ------------------------------------------------------------------------
    async def find(
        self, spec: JobSpec, principal: Principal, job_id: str, intent: str
    ) -> Submitted | None:
        """The local job created for ``job_id`` (its directory survived the crash)."""
        jid = self._by_tenantry.get(job_id)
        if jid is None:
            return None
        try:
            job = json.loads((self.root / jid / "job.json").read_text())
        except (OSError, ValueError):
            return None
        if intent and job.get("intent", intent) != intent:
            return None
        return Submitted(jid, str(job.get("output", "")), str(job.get("error", "")))

    async def submit(
        self, spec: JobSpec, principal: Principal, job_id: str, *, intent: str = ""
    ) -> Submitted:
        self.calls += 1
        if not spec.script_text.startswith("#!"):
            raise SubmissionRejected(
                "this does not look like a batch script: the first line must start with #!",
                hint="add an interpreter line such as #!/bin/bash",
            )
        cpus = max(1, spec.resources.cpus)
        if cpus > self.slots:
            raise SubmissionRejected(
                f"the job asks for {cpus} CPUs but the local backend has {self.slots} slots",
                hint=f"ask for at most --cpus {self.slots}",
            )
        if not Path(spec.cwd).is_dir():
            raise UsageError(f"working directory {spec.cwd!r} does not exist")
        jid = str(self._next)
        self._next += 1
        d = self.root / jid
        d.mkdir(mode=0o700)
        script = d / "script"
        script.write_text(spec.script_text)
        script.chmod(0o700)
        output = self._resolve(spec.output or "tenantry-%j.out", jid, spec.cwd)
        error = self._resolve(spec.error, jid, spec.cwd) if spec.error else ""
        env = dict(spec.env)
        env.update(
            TENANTRY_JOB_ID=job_id,
            TENANTRY_BACKEND_JOB_ID=jid,
            TENANTRY_CPUS=str(cpus),
        )
        job: dict[str, Any] = {
            "script": str(script),
            "args": list(spec.args),
            "cwd": spec.cwd,
            "env": env,
            "output": output,
            "error": error,
            "time_s": spec.resources.time_s,
            "cpus": cpus,
            "tenantry_id": job_id,
            "intent": intent,
            "principal": principal.key,
        }
        tmp = d / "job.json.tmp"
        tmp.write_text(json.dumps(job))
        os.replace(tmp, d / "job.json")
        self._by_tenantry[job_id] = jid
        self._jobs[jid] = _Entry(jid, d, cpus, JobState.PENDING)
        self._queue.append(jid)
        self._schedule()
        return Submitted(jid, output, error)

    async def query(self, backend_ids: Sequence[str]) -> dict[str, JobUpdate]:
        self.calls += 1
        return {i: self._jobs[i].update() for i in backend_ids if i in self._jobs}

    async def cancel(self, backend_id: str) -> None:
        self.calls += 1
        e = self._jobs.get(backend_id)
        if e is None:
            raise NotFound(f"local job {backend_id} does not exist")
        if e.state.terminal:
            return
        if e.state is JobState.PENDING:
            self._queue.remove(backend_id)
            self._finish(e, JobState.CANCELLED, None, "cancelled while pending")
            return
        e.reason = "cancelled"
        e.state = JobState.CANCELLED
        if e.pid:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(e.pid, signal.SIGTERM)
            self._spawn_task(self._kill_later(e))

    async def info(self) -> dict[str, Any]:
        busy = sum(e.cpus for e in self._jobs.values() if e.state is JobState.RUNNING)
        return {
            "backend": self.name,
            "partitions": [
                {
                    "name": "local",
                    "cpus": self.slots,
                    "cpus_busy": busy,
                    "max_time_s": None,
                    "gpus": 0,
                    "default": True,
                }
            ],
            "queued": len(self._queue),
            "running": sum(1 for e in self._jobs.values() if e.state is JobState.RUNNING),
        }

    # -- internals --------------------------------------------------------------------
    @staticmethod
    def _resolve(pattern: str, jid: str, cwd: str) -> str:
        path = pattern.replace("%j", jid).replace("%A", jid).replace("%x", "job")
        p = Path(path)
        return str(p if p.is_absolute() else Path(cwd) / p)

    @staticmethod
    def _read_status(d: Path) -> dict[str, Any] | None:
        try:
            data = json.loads((d / "status.json").read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    @staticmethod
    def _apply(e: _Entry, st: dict[str, Any]) -> None:
        e.state = JobState(st.get("state", "RUNNING"))
        e.pid = st.get("pid", e.pid)
        e.exit_code = st.get("exit_code")
        e.started_at = st.get("started_at")
        e.ended_at = st.get("ended_at")
        e.reason = st.get("reason", "")

    @staticmethod
    def _status_of(e: _Entry) -> dict[str, Any]:
        return {
            "state": e.state.value,
            "exit_code": e.exit_code,
            "started_at": e.started_at,
            "ended_at": e.ended_at,
            "reason": e.reason,
            "pid": e.pid,
        }

    def _finish(self, e: _Entry, state: JobState, code: int | None, reason: str) -> None:
        e.state, e.exit_code, e.reason = state, code, reason
        e.ended_at = time.time()
        write_status(e.dir, self._status_of(e))

    def _free(self) -> int:
        return self.slots - sum(e.cpus for e in self._jobs.values() if e.state is JobState.RUNNING)

    def _schedule(self) -> None:
        while self._queue and self._jobs[self._queue[0]].cpus <= self._free():
            e = self._jobs[self._queue.pop(0)]
            e.state = JobState.RUNNING
            e.started_at = time.time()
            self._spawn_task(self._run(e))
            if self.notify is not None:
                self.notify()

    def _spawn_task(self, coro: Any) -> None:
        self._tasks.spawn(coro)

    async def _run(self, e: _Entry) -> None:
        # intent first: a crash between here and the wrapper's own status write
        # must not make the job look never-started (it would run twice)
        try:
            write_status(e.dir, {"state": "RUNNING", "started_at": e.started_at, "pid": None})
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "tenantry.backends.local_job",
                str(e.dir),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            # (EMFILE, ENOMEM, ENOSPC...) the job fails and frees its slot; a job
            # left RUNNING here would hold its slots forever
            self._finish(e, JobState.FAILED, None, f"could not start the job: {exc}")
            self._schedule()
            if self.notify is not None:
                self.notify()
            return
        e.pid = proc.pid
        await proc.wait()
        self._collect(e)

    async def _watch_adopted(self, e: _Entry) -> None:
        assert e.pid is not None
        while _pid_is_wrapper(e.pid, e.dir):
            await asyncio.sleep(0.2)
        self._collect(e)

    def _collect(self, e: _Entry) -> None:
        cancelled = e.state is JobState.CANCELLED
        st = self._read_status(e.dir)
        if cancelled:
            self._finish(e, JobState.CANCELLED, (st or {}).get("exit_code"), "cancelled")
        elif st is None or st.get("state") == "RUNNING":
            self._finish(e, JobState.FAILED, None, "the job wrapper ended without a status")
        else:
            self._apply(e, st)
        self._schedule()
        if self.notify is not None:
            self.notify()

    async def _kill_later(self, e: _Entry) -> None:
        await asyncio.sleep(5)
        if e.pid and e.ended_at is None and _pid_is_wrapper(e.pid, e.dir):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(e.pid, signal.SIGKILL)
