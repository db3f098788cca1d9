"""SlurmBackend without a cluster: argv building, timeouts, missing binaries, recorded replies.

Stand-in clients are tiny scripts that print recorded real outputs, so these
run anywhere; the same behaviour on the real Slurm is in test_backend.py.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path

import pytest

from tenantry.backends.slurm import SlurmBackend
from tenantry.core import attribution, errors
from tenantry.core.models import JobSpec, JobState, Resources

from ..conftest import stand_in
from .conftest import PRINCIPAL, settings

V22 = Path(__file__).parent.parent / "fixtures" / "slurm" / "22.05"


def fake(tmp: Path, name: str, body: str) -> str:
    return str(stand_in(tmp, name, body))


def replay(tmp: Path, name: str, fixture: str, rc: int = 0) -> str:
    out = V22 / f"{fixture}.out"
    err = V22 / f"{fixture}.err"
    body = f"cat {shlex.quote(str(out))}"
    if err.exists():
        body += f"\ncat {shlex.quote(str(err))} >&2"
    return fake(tmp, name, body + f"\nexit {rc}")


def job_spec(tmp: Path, **kw: object) -> JobSpec:
    script = tmp / "job.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    return JobSpec(
        script=str(script),
        script_text=script.read_text(),
        cwd=str(tmp),
        **kw,  # type: ignore[arg-type]
    )


def test_sbatch_argv(tmp_path: Path) -> None:
    b = SlurmBackend(settings(slurm_partition="debug", slurm_account="chem"))
    spec = job_spec(
        tmp_path,
        name="train",
        resources=Resources(cpus=4, mem_mb=2048, gpus=2, time_s=90, partition="gpu"),
        array="0-3%2",
        extra=("--constraint=x",),
        error="err-%j.txt",
    )
    argv, on_stdin = b.sbatch_argv(spec, PRINCIPAL, "t-9")
    assert argv[:2] == ["sbatch", "--parsable"]
    tag = attribution.parse(argv[2].removeprefix("--comment="))
    assert tag == {"agent": "claude-code", "session": "sess-42;x", "user": "tester",
                   "project": "chem", "job": "t-9"}  # fmt: skip
    assert f"--chdir={tmp_path}" in argv and "--job-name=train" in argv
    assert "--output=tenantry-%A_%a.out" in argv and "--error=err-%j.txt" in argv
    assert "--cpus-per-task=4" in argv and "--mem=2048M" in argv and "--gres=gpu:2" in argv
    assert "--time=00:02:00" in argv  # rounded up to whole minutes
    assert "--partition=gpu" in argv and "--account=chem" in argv  # settings default
    assert "--array=0-3%2" in argv and "--constraint=x" in argv
    assert argv[-1] == spec.script and not on_stdin  # the file still holds the text
    Path(spec.script).write_text("#!/bin/bash\necho changed\n")
    argv, on_stdin = b.sbatch_argv(spec, PRINCIPAL, "t-9")
    assert on_stdin and spec.script not in argv


async def test_submit_and_query_on_recorded_replies(tmp_path: Path) -> None:
    bins = {
        "sbatch": replay(tmp_path, "sbatch", "sbatch-clusters"),
        "squeue": replay(tmp_path, "squeue", "squeue-fields"),
        "sacct": replay(tmp_path, "sacct", "sacct-parsable2"),
    }
    b = SlurmBackend(settings(), binaries=bins, user="ana")
    await b.start()
    sub = await b.submit(job_spec(tmp_path, output="o/%x-%j-%u.log"), PRINCIPAL, "t-1")
    job_id = (V22 / "sbatch-clusters.out").read_text().split(";")[0]
    assert sub.backend_id == job_id
    assert sub.output == f"{tmp_path}/o/job.sh-{job_id}-ana.log"
    ok, fail, array, held, *_ = (V22 / "squeue-fields.ids").read_text().split()
    gone = (V22 / "sbatch-ok.out").read_text().strip()  # left the queue: in sacct only
    got = await b.query([ok, fail, array, held, gone, "999999"])
    assert got[ok].state is JobState.COMPLETED and got[ok].exit_code == 0
    assert got[fail].state is JobState.FAILED and got[fail].exit_code == 3
    assert got[array].state is JobState.COMPLETED and len(got[array].extra["tasks"]) == 3
    assert got[held].state is JobState.PENDING and got[held].started_at is None
    assert {got[k].extra["source"] for k in (ok, fail, array, held)} == {"squeue"}
    assert got[gone].state is JobState.COMPLETED and got[gone].extra["source"] == "sacct"
    assert "999999" not in got
    assert b.calls == {"sbatch": 1, "squeue": 1, "sacct": 1}
    assert b.controller_calls == 2


async def test_query_asks_slurm_for_the_named_jobs_only(tmp_path: Path) -> None:
    """22.05's ``squeue --json`` prints every user's jobs whatever it is asked:
    a status poll reads the named jobs in columns instead."""
    seen = tmp_path / "argv"
    out = V22 / "squeue-fields.out"
    body = f'printf "%s\\n" "$@" > {seen}\necho "$SLURM_TIME_FORMAT" >> {seen}\ncat {out}'
    b = SlurmBackend(settings(), binaries={"squeue": fake(tmp_path, "squeue", body)})
    await b.start()
    ok = (V22 / "squeue-fields.ids").read_text().split()[0]
    got = await b.query([ok])
    assert got[ok].state is JobState.COMPLETED
    argv = seen.read_text().splitlines()
    assert "--json" not in argv and "--me" in argv and f"--jobs={ok}" in argv
    assert argv[-1] == "%s"  # epoch timestamps whatever the user's own time format


async def test_query_of_jobs_slurm_no_longer_holds_goes_to_sacct(tmp_path: Path) -> None:
    bins = {
        "squeue": replay(tmp_path, "squeue", "err-squeue-fields-unknown", rc=1),
        "sacct": replay(tmp_path, "sacct", "sacct-parsable2"),
    }
    b = SlurmBackend(settings(), binaries=bins)
    await b.start()
    gone = (V22 / "sbatch-ok.out").read_text().strip()
    got = await b.query([gone])
    assert got[gone].state is JobState.COMPLETED and got[gone].extra["source"] == "sacct"


async def test_recorded_rejection_becomes_actionable(tmp_path: Path) -> None:
    bins = {"sbatch": replay(tmp_path, "sbatch", "err-sbatch-partition", rc=1)}
    b = SlurmBackend(settings(), binaries=bins)
    await b.start()
    with pytest.raises(errors.SubmissionRejected) as info:
        await b.submit(job_spec(tmp_path, resources=Resources(partition="nope")), PRINCIPAL, "t")
    assert "nope" in info.value.message and info.value.details["reason"] == "invalid_partition"


async def test_controller_down_reply_is_unavailable(tmp_path: Path) -> None:
    bins = {"squeue": replay(tmp_path, "squeue", "down-squeue-fields", rc=1)}
    b = SlurmBackend(settings(), binaries=bins)
    await b.start()
    with pytest.raises(errors.BackendUnavailable):
        await b.query(["1"])
    with pytest.raises(errors.BackendUnavailable):  # a recovery must not submit again
        await b.find(job_spec(tmp_path), PRINCIPAL, "t-1", "tok")


async def test_own_timeout_kills_the_client(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    bins = {"squeue": fake(tmp_path, "squeue", f"echo $$ > {pidfile}; exec sleep 30")}
    b = SlurmBackend(settings(slurm_timeout_s=0.5), binaries=bins)
    await b.start()
    t0 = time.monotonic()
    with pytest.raises(errors.BackendUnavailable, match=r"within 0\.5 s"):
        await b.query(["1"])
    assert time.monotonic() - t0 < 5
    pid = int(pidfile.read_text())
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


async def test_missing_binary_is_unavailable(tmp_path: Path) -> None:
    b = SlurmBackend(settings(), binaries={"sinfo": str(tmp_path / "nope")})
    await b.start()
    with pytest.raises(errors.BackendUnavailable, match="not installed"):
        await b.info()


async def test_sacct_without_accounting_omits_jobs(tmp_path: Path) -> None:
    bins = {
        "squeue": replay(tmp_path, "squeue", "squeue-json"),
        "sacct": fake(
            tmp_path,
            "sacct",
            "echo 'sacct: error: Slurm accounting storage is disabled' >&2; exit 1",
        ),
    }
    b = SlurmBackend(settings(), binaries=bins)
    await b.start()
    assert await b.query(["999999"]) == {}


async def test_shims_on_path_are_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tenantry.agents.shims.install import install

    shims = tmp_path / "shims"
    install(shims)
    real = tmp_path / "real"
    real.mkdir()
    fake(real, "squeue", "true")
    monkeypatch.setenv("PATH", f"{shims}:{real}")
    b = SlurmBackend(settings())
    await b.start()
    assert b._bin["squeue"] == str(real / "squeue")
