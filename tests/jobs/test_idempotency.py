"""Idempotent submission: recovery asks the backend first; request ids replay."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from tenantry.backends.local import LocalBackend
from tenantry.client.sync import Client, socket_answers
from tenantry.core.models import AgentProduct, JobSpec, JobState, Principal
from tenantry.core.settings import Settings, load
from tenantry.gateway.app import open_runtime
from tenantry.jobs.service import JobService
from tenantry.store.journal import Journal

from ..conftest import new_job

ALICE = Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "s1")


def _settings(tmp: Path) -> Settings:
    return load(
        env={
            "TENANTRY_STATE_DIR": str(tmp / "state"),
            "TENANTRY_POLL_FAST_S": "0.02",
            "TENANTRY_POLL_SLOW_S": "0.05",
            "TENANTRY_LOCAL_SLOTS": "2",
        }
    )


def _spec(tmp: Path, log: Path, tag: str) -> JobSpec:
    text = f'#!/bin/sh\necho "$1" >> {log}\n'
    (tmp / "job.sh").write_text(text)
    return JobSpec(script=str(tmp / "job.sh"), script_text=text, args=(tag,), cwd=str(tmp))


async def _wait_terminal(svc: JobService, jid: str) -> JobState:
    async with asyncio.timeout(30):
        while True:
            job = await svc.get(ALICE, jid)
            if job.state.terminal:
                return job.state
            await asyncio.sleep(0.02)


async def test_crash_after_the_backend_acted_does_not_run_the_job_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window: the backend created the job, the journal never marked it handed."""
    log = tmp_path / "runs.log"
    settings = _settings(tmp_path)
    slow = asyncio.Event()

    async def crash_before_mark(self: Journal, *args: object) -> None:
        await slow.wait()  # the daemon "dies" here: the mark never lands

    async with open_runtime(settings) as rt:
        svc = rt.component("jobs", JobService)
        monkeypatch.setattr(Journal, "mark_handed", crash_before_mark)
        task = asyncio.create_task(svc.submit(ALICE, _spec(tmp_path, log, "once"), "req-1"))
        root = Path(settings.state_dir) / "local" / "jobs"
        async with asyncio.timeout(10):
            while not list(root.glob("*/job.json")):
                await asyncio.sleep(0.01)
        task.cancel()
        monkeypatch.undo()
    # restart: the unhanded row is recovered by asking the backend, not resubmitted
    async with open_runtime(settings) as rt:
        svc = rt.component("jobs", JobService)
        job = await svc.get(ALICE, "t1")
        assert job.backend_id == "1" and "found at the backend" in job.reason
        assert await _wait_terminal(svc, "t1") is JobState.COMPLETED
        # a retry of the same request returns that job
        again, existing, note = await svc.submit(ALICE, _spec(tmp_path, log, "once"), "req-1")
        assert (again.id, existing) == ("t1", True) and "existing job t1" in note
    assert log.read_text().split() == ["once"]
    assert sorted(p.name for p in root.iterdir()) == ["1"]


async def test_request_id_replays_the_first_result(tmp_path: Path) -> None:
    log = tmp_path / "runs.log"
    async with open_runtime(_settings(tmp_path)) as rt:
        svc = rt.component("jobs", JobService)
        spec = _spec(tmp_path, log, "a")
        first, existing, _ = await svc.submit(ALICE, spec, "r-a")
        assert not existing
        other = _spec(tmp_path, log, "b")
        results = await asyncio.gather(*(svc.submit(ALICE, other, "r-b") for _ in range(5)))
        assert len({j.id for j, _, _ in results}) == 1
        assert sum(1 for _, e, _ in results if not e) == 1
        again, existing, _ = await svc.submit(ALICE, spec, "r-a")
        assert again.id == first.id and existing


@pytest.mark.parametrize("journal_lags", [False, True], ids=["journal-ended", "journal-lags"])
async def test_dedup_never_returns_a_failed_job(tmp_path: Path, journal_lags: bool) -> None:
    """A resubmission of a failed job runs the script again, also when the poller's
    cache knew the job failed before the journal's row said so (``journal-lags``)."""
    async with open_runtime(_settings(tmp_path)) as rt:
        svc = rt.component("jobs", JobService)
        text = "#!/bin/sh\nexit 3\n"
        spec = JobSpec(script=str(tmp_path / "f.sh"), script_text=text, cwd=str(tmp_path))
        failed, _, _ = await svc.submit(ALICE, spec)
        assert await _wait_terminal(svc, failed.id) is JobState.FAILED
        if journal_lags:
            # the row as it stands while the journal's write of the end is still queued
            await rt.journal.db.execute(
                "UPDATE jobs SET state=? WHERE id=?", (JobState.RUNNING.value, failed.id)
            )
        fresh, existing, note = await svc.submit(ALICE, spec)
        assert fresh.id != failed.id and not existing and note == ""


async def test_secret_environment_is_never_journaled(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    async with open_runtime(settings) as rt:
        svc = rt.component("jobs", JobService)
        text = "#!/bin/sh\ntrue\n"
        spec = JobSpec(
            script=str(tmp_path / "e.sh"),
            script_text=text,
            cwd=str(tmp_path),
            env={"PATH": "/usr/bin:/bin", "MY_API_TOKEN": "s3cr3t-planted", "AWS_X": "s3cr3t"},
        )
        job, _, _ = await svc.submit(ALICE, spec)
        await _wait_terminal(svc, job.id)
    for f in Path(settings.state_dir).rglob("*"):
        if f.is_file():
            assert b"s3cr3t" not in f.read_bytes(), f


def test_local_backend_is_recoverable(tmp_path: Path) -> None:
    from tenantry.backends.base import Recoverable

    assert isinstance(LocalBackend(tmp_path), Recoverable)


async def test_jobs_of_another_backend_are_never_marked_lost(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    async with open_runtime(settings) as rt:
        other = new_job(
            ALICE, backend="slurm", backend_id="4242", state=JobState.RUNNING, name="far"
        )
        spec = JobSpec(script="/w/x.sh", script_text="#!/bin/sh\n", cwd="/w")
        other = await rt.journal.journal_job(other, spec, "h")
        await rt.journal.mark_handed(other.id, "4242", "", "")
    async with open_runtime(settings) as rt:
        svc = rt.component("jobs", JobService)
        for _ in range(5):
            await svc.poll_once()
        assert (await svc.get(ALICE, other.id)).state is JobState.RUNNING


def test_autostart_serves_the_backend_the_state_was_created_with(tmp_path: Path) -> None:
    state = Path(tempfile.mkdtemp(prefix="tnt-"))
    try:
        (state / "backend").write_text("slurm\n")
        settings = load(
            env={"TENANTRY_STATE_DIR": str(state), "TENANTRY_SOCKET": str(state / "sock")}
        )
        assert settings.backend == "local"
        client = Client(settings, autostart=True)
        health = client.health()
        assert health["backend"] == "slurm"
        os.kill(int(health["pid"]), signal.SIGTERM)
        deadline = time.monotonic() + 15
        while socket_answers(settings.socket) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        shutil.rmtree(state, ignore_errors=True)


async def test_a_job_that_cannot_start_fails_and_frees_its_slots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMFILE while starting a local job used to leave it RUNNING forever, slots taken."""
    real = asyncio.create_subprocess_exec
    failures = [OSError(24, "Too many open files")]

    async def flaky(*args: Any, **kw: Any) -> Any:
        if failures:
            raise failures.pop()
        return await real(*args, **kw)

    monkeypatch.setattr("tenantry.backends.local.asyncio.create_subprocess_exec", flaky)
    settings = load(
        env={
            "TENANTRY_STATE_DIR": str(tmp_path / "state"),
            "TENANTRY_POLL_FAST_S": "0.02",
            "TENANTRY_POLL_SLOW_S": "0.05",
            "TENANTRY_LOCAL_SLOTS": "1",
        }
    )
    async with open_runtime(settings) as rt:
        svc = rt.component("jobs", JobService)
        text = "#!/bin/sh\ntrue\n"
        spec = JobSpec(script=str(tmp_path / "a.sh"), script_text=text, cwd=str(tmp_path))
        first, _, _ = await svc.submit(ALICE, spec, "emfile-1")
        assert await _wait_terminal(svc, first.id) is JobState.FAILED
        assert "Too many open files" in (await svc.get(ALICE, first.id)).reason
        second, _, _ = await svc.submit(ALICE, dataclasses.replace(spec, args=("x",)))
        assert await _wait_terminal(svc, second.id) is JobState.COMPLETED


async def test_a_pending_job_shows_no_forecast_start(tmp_path: Path) -> None:
    """squeue reports a pending job's expected start: never taken as its start."""
    from tenantry.backends.base import JobUpdate
    from tenantry.backends.fake import FakeBackend

    fake = FakeBackend()
    async with open_runtime(_settings(tmp_path), fake) as rt:
        svc = rt.component("jobs", JobService)
        spec = JobSpec(script="/w/p.sh", script_text="#!/bin/sh\n", cwd="/w")
        job, _, _ = await svc.submit(ALICE, spec)
        fake.jobs[job.backend_id] = JobUpdate(
            job.backend_id, JobState.PENDING, started_at=time.time() + 3600
        )
        await svc.poll_once()
        assert (await svc.get(ALICE, job.id)).started_at is None


async def test_logs_of_an_array_show_every_task(tmp_path: Path) -> None:
    from tenantry.backends.fake import FakeBackend

    async with open_runtime(_settings(tmp_path), FakeBackend()) as rt:
        svc = rt.component("jobs", JobService)
        spec = JobSpec(script="/w/a.sh", script_text="#!/bin/sh\n", cwd="/w", array="0-2")
        job, _, _ = await svc.submit(ALICE, spec)
        svc.cache[job.id].output = str(tmp_path / "tenantry-7_%a.out")
        for n in (0, 2, 10):
            (tmp_path / f"tenantry-7_{n}.out").write_text(f"task {n} says hi\n")
        out = await svc.logs(ALICE, job.id)
        assert out["tasks"] == [0, 2, 10]
        assert out["text"].index("task 2 says") < out["text"].index("task 10 says")
        one = await svc.logs(ALICE, job.id, task="2")
        assert one["text"] == "task 2 says hi"


async def test_logs_never_follow_a_link_planted_as_the_output(tmp_path: Path) -> None:
    """An output file replaced by a link (to a key, or anywhere) is not read through."""
    from tenantry.backends.fake import FakeBackend
    from tenantry.core.errors import PermissionDenied, UsageError

    async with open_runtime(_settings(tmp_path), FakeBackend()) as rt:
        svc = rt.component("jobs", JobService)
        spec = JobSpec(script="/w/a.sh", script_text="#!/bin/sh\n", cwd="/w")
        job, _, _ = await svc.submit(ALICE, spec)
        keys = tmp_path / "copy" / ".ssh"
        keys.mkdir(parents=True)
        (keys / "id_ed25519").write_text("PRIVATE KEY\n")
        (tmp_path / "notes.txt").write_text("elsewhere\n")
        out = tmp_path / "slurm-7.out"
        svc.cache[job.id].output = str(out)
        out.symlink_to(keys / "id_ed25519")
        with pytest.raises(PermissionDenied, match="credential"):
            await svc.logs(ALICE, job.id)
        out.unlink()
        out.symlink_to(tmp_path / "notes.txt")
        with pytest.raises(UsageError, match="symbolic link"):
            await svc.logs(ALICE, job.id)
        out.unlink()
        out.write_text("the job's own words\n")
        assert (await svc.logs(ALICE, job.id))["text"] == "the job's own words"
