"""SlurmBackend against the real single-node Slurm (scripts/dev-slurm).

The timeout test is in ``test_timeout.py`` (it runs last; its job is
submitted by the first test here so the wait overlaps the other tests).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tenantry.backends.base import Backend
from tenantry.backends.slurm import SlurmBackend
from tenantry.core import attribution, errors
from tenantry.core.models import JobState, Resources

from .conftest import (
    DEV_SLURM,
    PIDS,
    PRINCIPAL,
    Env,
    sacct_row,
    settings,
    spec,
    wait_until,
)

pytestmark = pytest.mark.slurm


def terminal(u) -> bool:  # type: ignore[no-untyped-def]
    return bool(u.state.terminal)


async def test_is_a_backend(backend: SlurmBackend, timeout_job: str) -> None:
    assert isinstance(backend, Backend)
    assert backend.name == "slurm"


async def test_submit_runs_and_completes(backend: SlurmBackend, workdir: Path) -> None:
    s = spec(workdir, 'echo "hello $SLURM_JOB_ID from $SLURM_JOB_NAME"', name="tnt-hello")
    sub = await backend.submit(s, PRINCIPAL, "t-1")
    assert sub.backend_id.isdigit()
    assert sub.output == f"{workdir}/tenantry-{sub.backend_id}.out"
    assert sub.error == ""
    done = await wait_until(backend, sub.backend_id, terminal)
    assert done.state is JobState.COMPLETED and done.exit_code == 0
    assert done.started_at and done.ended_at and done.ended_at >= done.started_at
    assert Path(sub.output).read_text() == f"hello {sub.backend_id} from tnt-hello\n"
    assert backend.calls["sbatch"] == 1 and backend.calls["squeue"] >= 1


async def test_options_reach_slurm(backend: SlurmBackend, workdir: Path) -> None:
    s = spec(
        workdir,
        'echo "cpus=$SLURM_CPUS_PER_TASK part=$SLURM_JOB_PARTITION"; echo err >&2',
        name="tnt-opts",
        output="%x-%j.log",
        error="errs/%j.err",
        resources=Resources(cpus=2, mem_mb=300, gpus=1, time_s=90, partition="gpu"),
    )
    (workdir / "errs").mkdir()
    sub = await backend.submit(s, PRINCIPAL, "t-2")
    assert sub.output == f"{workdir}/tnt-opts-{sub.backend_id}.log"
    assert sub.error == f"{workdir}/errs/{sub.backend_id}.err"
    done = await wait_until(backend, sub.backend_id, terminal)
    assert done.state is JobState.COMPLETED
    assert Path(sub.output).read_text() == "cpus=2 part=gpu\n"
    assert Path(sub.error).read_text() == "err\n"
    limit, tres = await sacct_row(sub.backend_id, "Timelimit,ReqTRES")
    assert limit == "00:02:00" and "gres/gpu=1" in tres and "mem=300M" in tres


async def test_script_args_and_stdin(backend: SlurmBackend, workdir: Path) -> None:
    # with args the file is used; when the file changed after submission the text wins
    s = spec(workdir, 'echo "args: $*"', args=("a b", "c"))
    sub = await backend.submit(s, PRINCIPAL, "t-3")
    await wait_until(backend, sub.backend_id, terminal)
    assert Path(sub.output).read_text() == "args: a b c\n"
    s2 = spec(workdir, "echo original")
    Path(s2.script).write_text("#!/bin/bash\necho changed\n")
    sub2 = await backend.submit(s2, PRINCIPAL, "t-4")
    await wait_until(backend, sub2.backend_id, terminal)
    assert Path(sub2.output).read_text() == "original\n"


async def test_failing_job(backend: SlurmBackend, workdir: Path) -> None:
    sub = await backend.submit(spec(workdir, "echo about to fail; exit 3"), PRINCIPAL, "t-5")
    done = await wait_until(backend, sub.backend_id, terminal)
    assert done.state is JobState.FAILED and done.exit_code == 3
    assert done.reason == "NonZeroExitCode"


async def test_cancel_running_job(backend: SlurmBackend, workdir: Path) -> None:
    sub = await backend.submit(spec(workdir, "sleep 300"), PRINCIPAL, "t-6")
    await wait_until(backend, sub.backend_id, lambda u: u.state is JobState.RUNNING)
    await backend.cancel(sub.backend_id)
    done = await wait_until(backend, sub.backend_id, terminal)
    assert done.state is JobState.CANCELLED
    await backend.cancel(sub.backend_id)  # cancelling again is harmless
    with pytest.raises(errors.UsageError):
        await backend.cancel("42; rm -rf /")


async def test_array_job(backend: SlurmBackend, workdir: Path) -> None:
    s = spec(workdir, 'echo "task $SLURM_ARRAY_TASK_ID"', array="0-2", output="arr-%A_%a.out")
    sub = await backend.submit(s, PRINCIPAL, "t-7")
    done = await wait_until(backend, sub.backend_id, terminal)
    assert done.state is JobState.COMPLETED
    assert sorted(done.extra["tasks"]) == [f"{sub.backend_id}_{i}" for i in range(3)]
    for i in range(3):
        assert (workdir / f"arr-{sub.backend_id}_{i}.out").read_text() == f"task {i}\n"
    one = await backend.query([f"{sub.backend_id}_1"])
    assert one[f"{sub.backend_id}_1"].state is JobState.COMPLETED


async def test_array_with_a_failing_task_fails(backend: SlurmBackend, workdir: Path) -> None:
    s = spec(workdir, '[ "$SLURM_ARRAY_TASK_ID" != 1 ]', array="0-2")
    sub = await backend.submit(s, PRINCIPAL, "t-8")
    done = await wait_until(backend, sub.backend_id, terminal)
    assert done.state is JobState.FAILED and done.exit_code == 1


async def test_query_many_costs_one_squeue(backend: SlurmBackend, workdir: Path) -> None:
    subs = [await backend.submit(spec(workdir, "true"), PRINCIPAL, f"m-{i}") for i in range(5)]
    before = backend.calls["squeue"]
    got = await backend.query([s.backend_id for s in subs] + ["999999"])
    assert set(got) <= {s.backend_id for s in subs}
    assert backend.calls["squeue"] == before + 1
    assert "999999" not in got


async def test_attribution_visible_in_sacct(backend: SlurmBackend, workdir: Path) -> None:
    sub = await backend.submit(spec(workdir, "true"), PRINCIPAL, "t-attr")
    await wait_until(backend, sub.backend_id, terminal)
    (comment,) = await sacct_row(sub.backend_id, "Comment")
    tag = attribution.parse(comment)
    assert tag == {
        "agent": "claude-code",
        "session": "sess-42;x",
        "user": "tester",
        "project": "chem",
        "job": "t-attr",
    }


async def test_jobs_that_left_squeue_come_from_sacct(backend: SlurmBackend, workdir: Path) -> None:
    sub = await backend.submit(spec(workdir, "exit 4"), PRINCIPAL, "t-sacct")
    await wait_until(backend, sub.backend_id, terminal)
    # accounting lags squeue by a fraction of a second: wait (with a deadline)
    # until slurmdbd has the end record, as the poller would after MinJobAge
    deadline = time.monotonic() + 30
    while True:
        got = await backend._from_sacct([sub.backend_id])
        if sub.backend_id in got and got[sub.backend_id].state.terminal:
            break
        assert time.monotonic() < deadline, f"sacct never showed the end: {got}"
        await asyncio.sleep(0.2)
    assert got[sub.backend_id].state is JobState.FAILED
    assert got[sub.backend_id].exit_code == 4
    assert got[sub.backend_id].extra["source"] == "sacct"


@pytest.mark.parametrize(
    ("res", "reason"),
    [
        (Resources(partition="nope"), "invalid_partition"),
        (Resources(partition="gpu", time_s=7200), "time_limit"),
        (Resources(cpus=999), "node_config"),
        (Resources(account="nope"), "invalid_account"),
    ],
)
async def test_rejections_are_actionable(
    backend: SlurmBackend, workdir: Path, res: Resources, reason: str
) -> None:
    with pytest.raises(errors.SubmissionRejected) as info:
        await backend.submit(spec(workdir, "true", resources=res), PRINCIPAL, "t-bad")
    assert info.value.details["reason"] == reason
    assert info.value.hint


async def test_reserved_and_stray_extras_refused(backend: SlurmBackend, workdir: Path) -> None:
    with pytest.raises(errors.UsageError, match="--comment"):
        await backend.submit(spec(workdir, "true", extra=("--comment=x",)), PRINCIPAL, "t")
    with pytest.raises(errors.UsageError, match="not an option"):
        await backend.submit(spec(workdir, "true", extra=("other.sh",)), PRINCIPAL, "t")
    assert backend.calls["sbatch"] == 0


async def test_info(backend: SlurmBackend) -> None:
    info = await backend.info()
    parts = {p["name"]: p for p in info["partitions"]}
    assert parts["debug"]["default"] and parts["gpu"]["max_time_s"] == 1800
    assert parts["gpu"]["max_time"] == "00:30:00" and parts["debug"]["default_time"] == "00:10:00"
    json.dumps(info, allow_nan=False)  # JSON-safe for every surface
    assert info["defaults"]["partition"] == "debug"
    assert any(n["gpus"] >= 1 for n in info["nodes"])
    assert info["slurm_version"].startswith("2")


@pytest.mark.skipif(os.geteuid() != 0, reason="stopping slurmctld needs root")
async def test_controller_down_then_back(backend: SlurmBackend, workdir: Path, env: Env) -> None:
    """One test, so the controller is down once, briefly, and always restored.

    Backend: BackendUnavailable within its timeout. Daemon: status served from
    the cache marked stale, submissions refused as retryable, nothing lost,
    recovery when the controller returns.
    """
    if not PIDS.is_file() or "slurmctld" not in PIDS.read_text():
        pytest.skip("Slurm was not started by scripts/dev-slurm")
    client = env.client()
    script = workdir / "long.sh"
    script.write_text("#!/bin/bash\nsleep 25\n")
    job = await asyncio.to_thread(
        client.call,
        "jobs.submit",
        {"script": str(script), "script_text": script.read_text(), "cwd": str(workdir)},
    )
    job_id = job["job"]["id"]

    def status() -> dict[str, Any]:
        return dict(client.call("jobs.status", {"ids": [job_id]})["jobs"][0])

    async def until(cond: Any, what: str, timeout: float = 30.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = await asyncio.to_thread(status)
            if cond(got):
                return got
            await asyncio.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}")

    await until(lambda j: j["state"] == "RUNNING", "RUNNING")
    quick = SlurmBackend(settings(slurm_timeout_s=3.0))
    await quick.start()
    subprocess.run([str(DEV_SLURM), "ctld", "stop"], check=True, capture_output=True)
    try:
        t0 = time.monotonic()
        with pytest.raises(errors.BackendUnavailable) as info:
            await quick.query([job["job"]["backend_id"]])
        assert time.monotonic() - t0 < 5.0 and info.value.retryable
        with pytest.raises(errors.BackendUnavailable):
            await quick.cancel(job["job"]["backend_id"])
        stale = await until(lambda j: j["stale"], "stale status")
        assert stale["state"] == "RUNNING" and stale["stale_reason"]
        other = workdir / "other.sh"
        other.write_text("#!/bin/bash\ntrue\n")
        with pytest.raises(errors.BackendUnavailable) as refused:
            await asyncio.to_thread(
                client.call,
                "jobs.submit",
                {"script": str(other), "script_text": other.read_text(), "cwd": str(workdir)},
            )
        assert refused.value.retryable
    finally:
        subprocess.run([str(DEV_SLURM), "ctld", "start"], check=True, capture_output=True)
    back = await until(lambda j: not j["stale"], "fresh status again")
    assert back["state"] in {"RUNNING", "COMPLETED"}  # the job survived
    await asyncio.to_thread(client.call, "jobs.cancel", {"id": job_id})
    await quick.aclose()


COPYCAT = "tt-copycat"


def _copycat() -> None:
    """A second Unix user with a Slurm association (idempotent)."""
    if subprocess.run(["id", COPYCAT], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--user-group", "--no-create-home", "--shell", "/bin/sh",
                        COPYCAT], check=True)  # fmt: skip
    have = subprocess.run(["sacctmgr", "-nP", "show", "assoc", f"user={COPYCAT}", "format=user"],
                          capture_output=True, text=True, check=True).stdout  # fmt: skip
    if COPYCAT not in have.split():
        subprocess.run(["sacctmgr", "-i", "add", "user", COPYCAT, "account=root"],
                       capture_output=True, check=True)  # fmt: skip


async def test_recovery_never_adopts_another_users_job_with_the_same_token(
    backend: SlurmBackend, workdir: Path
) -> None:
    """squeue shows every job's comment: a user who copies one, intent token and all,
    into a job of their own is not taken for the job a crashed daemon was submitting
    (22.05's ``squeue --json --me`` lists every user's jobs)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to submit as a second user")
    _copycat()
    intent = "c0pyc47" + os.urandom(4).hex()
    comment = attribution.encode(PRINCIPAL, "t-77", intent)
    theirs = subprocess.run(
        ["su", COPYCAT, "-c", f"cd /tmp && sbatch --parsable --hold -o /dev/null"
         f" --comment='{comment}' --wrap true"],
        capture_output=True, text=True, check=True,
    ).stdout.strip().split(";")[0]  # fmt: skip
    try:
        s = spec(workdir, "true", name="tnt-recover")
        assert await backend.find(s, PRINCIPAL, "t-77", intent) is None
        # the user's own job with that token is found
        mine = await backend.submit(s, PRINCIPAL, "t-77", intent=intent)
        found = await backend.find(s, PRINCIPAL, "t-77", intent)
        assert found is not None and found.backend_id == mine.backend_id != theirs
    finally:
        subprocess.run(["scancel", theirs], check=False)
