"""PATH shims: formatters vs. recorded real outputs, dispatch, install, real-binary exec."""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tenantry.agents.shims import formats as fm
from tenantry.agents.shims import run
from tenantry.agents.shims.install import install
from tenantry.backends import slurm_parse as sp
from tenantry.core import errors
from tenantry.core.models import Job, JobState, Resources

from ..conftest import run_tenantry

V22 = Path(__file__).parent.parent / "fixtures" / "slurm" / "22.05"
AGENT_ENV = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "s-1", "PATH": "/usr/bin:/bin"}


def from_slurm(j: sp.SlurmJob, state: str | None = None) -> fm.ShimJob:
    return fm.ShimJob(
        job_id=j.job_id,
        name=j.name,
        user=j.user,
        uid=0,
        state=state or j.state.value,
        reason=j.reason,
        exit_code=j.exit_code,
        signal=j.signal,
        submit_time=j.submit_time,
        start_time=j.start_time,
        end_time=j.end_time,
        time_limit_s=j.time_limit_s,
        partition=j.partition,
        account=j.account,
        cpus=j.cpus or 1,
        nodes=j.nodes,
        cwd=j.cwd,
        stdout=j.stdout,
        stderr=j.stderr,
        comment=j.comment,
    )


def recorded_squeue() -> dict[str, sp.SlurmJob]:
    return {j.job_id: j for j in sp.parse_squeue_json((V22 / "squeue-json.out").read_text())}


# --- formatters vs. real output -------------------------------------------------------


def test_squeue_default_table_matches_real_layout() -> None:
    real = (V22 / "squeue-default.out").read_text().splitlines()
    jobs = recorded_squeue()
    ids = [line.split()[0] for line in real[1:]]
    ours = fm.format_squeue([from_slurm(jobs[i]) for i in ids]).splitlines()
    assert ours[0] == real[0]
    assert len(ours) == len(real)
    for mine, theirs in zip(ours[1:], real[1:], strict=True):
        assert mine[:50] == theirs[:50]  # JOBID .. ST
        assert mine[60:] == theirs[60:]  # NODES, NODELIST(REASON); TIME differs by clock


def test_squeue_custom_format_matches_real() -> None:
    real = (V22 / "squeue-format.out").read_text().splitlines()
    jobs = recorded_squeue()
    fmt = "%i|%T|%r|%j|%u|%P|%M|%l|%D|%R"
    for line in real:
        cells = line.split("|")
        (mine,) = fm.format_squeue([from_slurm(jobs[cells[0]])], fmt, header=False).splitlines()
        ours = mine.split("|")
        assert ours[:6] == cells[:6] and ours[7:] == cells[7:]


def test_squeue_json_keys_and_types_follow_the_real_shape() -> None:
    real_job = json.loads((V22 / "squeue-json.out").read_text())["jobs"][0]
    jobs = list(recorded_squeue().values())
    doc = json.loads(fm.squeue_json([from_slurm(j) for j in jobs]))
    assert set(doc) == {"meta", "errors", "jobs"}
    for job in doc["jobs"]:
        for key, value in job.items():
            assert key in real_job
            if value is not None and real_job[key] is not None:
                assert type(value) is type(real_job[key]), key
    again = {j.job_id: j for j in sp.parse_squeue_json(json.dumps(doc))}
    for j in jobs:
        got = again[j.job_id]
        assert (got.state, got.exit_code, got.reason, got.comment) == (
            j.state,
            j.exit_code,
            j.reason,
            j.comment,
        )


def test_sacct_default_table_matches_real() -> None:
    real = (V22 / "sacct-default.out").read_text().splitlines()
    rows = {
        r["JobID"]: r for r in sp.parse_sacct_parsable((V22 / "sacct-parsable2.out").read_text())
    }
    done = [
        line
        for line in real[2:]
        if "." not in line.split()[0]
        and line.split()[0] in rows
        and "RUNNING" not in line
        and rows[line.split()[0]]["NodeList"] != "None assigned"  # never allocated: 0 CPUs
    ]
    assert done
    jobs = []
    for line in done:
        row = rows[line.split()[0]]
        j = sp.sacct_row_job(row)
        jobs.append(from_slurm(j, state=row["State"]))
    ours = fm.format_sacct(jobs).splitlines()
    assert ours[:2] == real[:2]
    assert ours[2:] == done


def test_sacct_parsable2_header_and_columns() -> None:
    real = (V22 / "sacct-parsable2-jobs.out").read_text().splitlines()
    fields = real[0].split("|")
    rows = sp.parse_sacct_parsable("\n".join(real))
    jobs = [from_slurm(sp.sacct_row_job(r)) for r in rows]
    ours = fm.format_sacct(jobs, fields, parsable="2").splitlines()
    assert ours[0] == real[0]
    for mine, theirs in zip(ours[1:], real[1:], strict=True):
        assert mine.split("|")[:4] == theirs.split("|")[:4]  # SubmitLine is Slurm's own
    assert fm.format_sacct(jobs, ["JobID"], parsable="1", header=False).endswith("|\n")


def test_scontrol_show_job_keys_in_real_order() -> None:
    for name in ("running", "completed", "pending"):
        (real,) = sp.parse_scontrol((V22 / f"scontrol-show-job-{name}.out").read_text())
        j = recorded_squeue()[real["JobId"]]
        for oneliner in (False, True):
            text = fm.format_scontrol_job([from_slurm(j)], oneliner=oneliner)
            (ours,) = sp.parse_scontrol(text)
            keys = list(ours)
            assert set(keys) <= set(real)
            real_order = [k for k in real if k in ours]
            assert keys == real_order
            for k in ("JobId", "JobName", "JobState", "Reason", "TimeLimit", "Partition"):
                assert ours[k] == real[k], (name, k)
            if real["JobState"] != "PENDING":
                assert ours["NodeList"] == real["NodeList"]


# --- dispatch in an agent context --------------------------------------------------------


def make_job(i: int, state: JobState, **kw: Any) -> dict[str, Any]:
    now = time.time()
    job = Job(
        id=f"t-{i}",
        backend="slurm",
        backend_id=str(100 + i),
        state=state,
        principal="ana/claude-code/s-1",
        uid=1000,
        name=kw.pop("name", f"job{i}"),
        submitted_at=now - 60,
        started_at=None if state is JobState.PENDING else now - 30,
        ended_at=now - 5 if state.terminal else None,
        exit_code=kw.pop("exit_code", 0 if state.terminal else None),
        reason=kw.pop("reason", ""),
        output=f"/w/tenantry-{100 + i}.out",
        resources=Resources(cpus=2, time_s=600, partition="debug"),
    )
    return job.to_dict()


class FakeDaemon:
    def __init__(self, jobs: list[dict[str, Any]]) -> None:
        self.jobs = jobs
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, op: str, params: dict[str, Any]) -> Any:
        self.calls.append((op, params))
        if op == "jobs.list":
            return {"jobs": self.jobs}
        if op == "jobs.submit":
            job = make_job(9, JobState.PENDING)
            return {"job": job, "deduplicated": bool(params.get("dedup")), "note": ""}
        if op == "jobs.cancel":
            return {"job": {}}
        raise errors.NotFound(f"no op {op}")


def shim(
    name: str, argv: list[str], daemon: FakeDaemon, env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = run.main(name, argv, env=env or AGENT_ENV, call=daemon, out=out, err=err)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture
def daemon() -> FakeDaemon:
    return FakeDaemon(
        [
            make_job(1, JobState.RUNNING, name="train"),
            make_job(2, JobState.PENDING, reason="Priority"),
            make_job(3, JobState.FAILED, exit_code=3),
            make_job(4, JobState.COMPLETED),
        ]
    )


def test_squeue_shows_active_jobs_like_squeue(daemon: FakeDaemon) -> None:
    rc, out, err = shim("squeue", [], daemon)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == [
        "JOBID",
        "PARTITION",
        "NAME",
        "USER",
        "ST",
        "TIME",
        "NODES",
        "NODELIST(REASON)",
    ]
    assert [ln.split()[0] for ln in lines[1:]] == ["101", "102"]
    assert lines[2].split()[4] == "PD" and lines[2].endswith("(Priority)")
    assert daemon.calls == [("jobs.list", {"all": True})]


def test_squeue_filters_and_formats(daemon: FakeDaemon) -> None:
    rc, out, _ = shim("squeue", ["-h", "-t", "all", "-j", "103,104", "-o", "%i %T"], daemon)
    assert out == "103 FAILED\n104 COMPLETED\n"
    rc, out, _ = shim("squeue", ["--me", "-h", "--states=PD", "--format=%i"], daemon)
    assert out == "102\n"
    rc, out, _ = shim("squeue", ["--json"], daemon)
    jobs = {j.job_id: j for j in sp.parse_squeue_json(out)}
    assert jobs["103"].state is JobState.FAILED and jobs["103"].exit_code == 3
    rc, out, _ = shim("squeue", ["-h", "-O", "JobID:.6,State:10,Name"], daemon)
    assert out.splitlines()[0] == "   101RUNNING   train" + " " * 15  # as real squeue -O
    rc, out, err = shim("squeue", ["--weird-option", "-h"], daemon)
    assert rc == 0 and "ignored: --weird-option" in err


def test_sacct_parsable_and_table(daemon: FakeDaemon) -> None:
    rc, out, _ = shim(
        "sacct", ["-P", "-X", "-j", "103", "--format=JobID,State,ExitCode,Comment"], daemon
    )
    assert rc == 0
    header, row = out.splitlines()
    assert header == "JobID|State|ExitCode|Comment"
    cells = row.split("|")
    assert cells[:3] == ["103", "FAILED", "3:0"]
    assert cells[3].startswith("tenantry:v1;agent=claude-code;session=s-1;user=ana")
    _rc, out, _ = shim("sacct", ["-n", "--brief"], daemon)
    assert next(ln.split()[:2] for ln in out.splitlines()) == ["101", "RUNNING"]


def test_sbatch_submits_through_the_daemon(daemon: FakeDaemon, tmp_path: Path) -> None:
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --time=5\necho hi\n")
    env = {**AGENT_ENV, "MY_API_KEY": "secret", "OMP_NUM_THREADS": "4"}
    argv = [
        "-c", "4", "--mem=2G", "--gres=gpu:2", "-t", "1-02:00", "-p", "gpu", "-J", "train",
        "--comment=mine", "--qos=high", "-D", str(tmp_path), str(script), "arg1",
    ]  # fmt: skip
    rc, out, err = shim("sbatch", argv, daemon, env)
    assert rc == 0 and out == "Submitted batch job 109\n"
    assert "--comment is set by Tenantry" in err
    op, params = daemon.calls[-1]
    assert op == "jobs.submit"
    assert params["resources"] == {"cpus": 4, "time_s": 93600, "partition": "gpu"}
    assert params["script"] == str(script) and params["script_text"] == script.read_text()
    # memory and GPUs reach the daemon's job request model verbatim
    assert params["args"] == ["arg1"]
    assert params["extra"] == ["--qos=high", "--mem=2G", "--gres=gpu:2"]
    assert params["name"] == "train" and params["cwd"] == str(tmp_path)
    assert "MY_API_KEY" not in params["env"] and params["env"]["OMP_NUM_THREADS"] == "4"
    rc, out, _ = shim("sbatch", ["--parsable", "--wrap", "hostname"], daemon)
    assert out == "109\n" and daemon.calls[-1][1]["script_text"] == "#!/bin/sh\nhostname\n"


def test_sbatch_mem_zero_stays_a_whole_node(daemon: FakeDaemon, tmp_path: Path) -> None:
    """--mem=0 was submitted as --mem=1M; it now reaches sbatch as written."""
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\ntrue\n")
    rc, _out, _err = shim("sbatch", ["--mem=0", "--nodes=1", str(script)], daemon, AGENT_ENV)
    assert rc == 0
    params = daemon.calls[-1][1]
    assert "mem_mb" not in params["resources"] and "--mem=0" in params["extra"]


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10", 600), ("5:30", 330), ("1:00:00", 3600), ("2-0", 172800), ("1-01:30", 91800)],
)
def test_sbatch_time_formats(text: str, seconds: int) -> None:
    assert run._time_s(text) == seconds


def test_scancel_maps_slurm_ids_to_tenantry_ids(daemon: FakeDaemon) -> None:
    rc, _, err = shim("scancel", ["101", "999"], daemon)
    assert rc == 1 and "Kill job error on job id 999: Invalid job id specified" in err
    assert ("jobs.cancel", {"id": "t-1"}) in daemon.calls
    daemon.calls.clear()
    rc, _, _ = shim("scancel", ["--me"], daemon)
    assert [c for c in daemon.calls if c[0] == "jobs.cancel"] == [
        ("jobs.cancel", {"id": "t-1"}),
        ("jobs.cancel", {"id": "t-2"}),
    ]
    rc, _, err = shim("scancel", ["1;rm"], daemon)
    assert rc == 1 and "Invalid job id" in err


def test_scontrol_show_job(daemon: FakeDaemon) -> None:
    rc, out, _ = shim("scontrol", ["show", "job", "103"], daemon)
    (rec,) = sp.parse_scontrol(out)
    assert rec["JobId"] == "103" and rec["JobState"] == "FAILED" and rec["ExitCode"] == "3:0"
    rc, out, err = shim("scontrol", ["show", "job", "555"], daemon)
    assert rc == 1 and "Invalid job id specified" in err
    rc, out, _ = shim("scontrol", ["-o", "show", "job"], daemon)
    assert len(out.splitlines()) == 4


def test_daemon_errors_are_printed_not_raised() -> None:
    def broken(op: str, params: dict[str, Any]) -> Any:
        raise errors.DaemonUnavailable("no daemon", hint="start it")

    out, err = io.StringIO(), io.StringIO()
    rc = run.main("squeue", [], env=AGENT_ENV, call=broken, out=out, err=err)
    assert rc == 1 and "squeue: error: no daemon" in err.getvalue()


# --- installed wrappers: human context execs the real binary ------------------------------


@pytest.fixture
def fake_real(tmp_path: Path) -> Path:
    real = tmp_path / "realbin"
    real.mkdir()
    for name in run.NAMES:
        p = real / name
        p.write_text(f'#!/bin/sh\necho "REAL {name} $*"\n')
        p.chmod(0o755)
    return real


def test_install_writes_executable_wrappers(tmp_path: Path) -> None:
    paths = install(tmp_path / "shims")
    assert sorted(Path(p).name for p in paths) == sorted(run.NAMES)
    for p in paths:
        assert os.access(p, os.X_OK) and run.MARKER in Path(p).read_text()
    install(tmp_path / "shims")  # idempotent
    other = tmp_path / "other"
    other.mkdir()
    (other / "squeue").write_text("#!/bin/sh\n")
    with pytest.raises(errors.Conflict):
        install(other)


def test_human_context_execs_the_real_binary(tmp_path: Path, fake_real: Path) -> None:
    shims = tmp_path / "shims"
    shims2 = tmp_path / "shims2"
    install(shims)
    install(shims2)  # a second shim dir on PATH must not be mistaken for the real one
    env = {"PATH": f"{shims}:{shims2}:{fake_real}:/usr/bin:/bin", "HOME": str(tmp_path)}
    for name in run.NAMES:
        res = subprocess.run([name, "-j", "5"], env=env, capture_output=True, text=True, timeout=30)
        assert res.returncode == 0, res.stderr
        assert res.stdout == f"REAL {name} -j 5\n"


def test_agent_scontrol_other_verbs_exec_the_real_binary(tmp_path: Path, fake_real: Path) -> None:
    shims = tmp_path / "shims"
    install(shims)
    env = {"PATH": f"{shims}:{fake_real}:/usr/bin:/bin", "CLAUDECODE": "1", "HOME": str(tmp_path)}
    res = subprocess.run(
        ["scontrol", "show", "partition"], env=env, capture_output=True, text=True, timeout=30
    )
    assert res.stdout == "REAL scontrol show partition\n"


def test_no_real_binary_is_127(tmp_path: Path) -> None:
    shims = tmp_path / "shims"
    install(shims)
    res = subprocess.run(
        [str(shims / "squeue")],
        env={"PATH": f"{shims}:/nonexistent"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 127 and "command not found" in res.stderr


def test_python_m_entry_point(tmp_path: Path, fake_real: Path) -> None:
    env = {
        "PATH": f"{fake_real}:/usr/bin:/bin",
        "PYTHONPATH": str(Path(run.__file__).parents[3]),
    }
    res = run_tenantry("sacct", "-P", env=env, timeout=30, module="tenantry.agents.shims")
    assert res.stdout == "REAL sacct -P\n"
