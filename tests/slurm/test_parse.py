"""The Slurm parsers on recorded real outputs (22.05) and the newer JSON shape (24.05)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tenantry.backends import slurm_parse as sp
from tenantry.core import attribution, errors
from tenantry.core.models import JobState

FIX = Path(__file__).parent.parent / "fixtures" / "slurm"
V22 = FIX / "22.05"
V24 = FIX / "24.05"


def read(path: Path) -> str:
    return path.read_text()


def sbatch_id(name: str) -> str:
    return read(V22 / f"{name}.out").strip().split(";")[0]


def err(name: str) -> str:
    return read(V22 / f"{name}.err")


# --- sbatch ---------------------------------------------------------------------


def test_sbatch_parsable_plain_and_with_cluster() -> None:
    job_id, cluster = sp.parse_sbatch(read(V22 / "sbatch-ok.out"))
    assert job_id.isdigit() and cluster == ""
    job_id, cluster = sp.parse_sbatch(read(V22 / "sbatch-clusters.out"))
    assert job_id.isdigit() and cluster == "tenantry"


def test_sbatch_without_id_is_an_error() -> None:
    with pytest.raises(errors.BackendError, match="no job id"):
        sp.parse_sbatch("sbatch: warning: something\n")


# --- squeue ---------------------------------------------------------------------


def test_squeue_22_running_pending_finished() -> None:
    jobs = {j.job_id: j for j in sp.parse_squeue_json(read(V22 / "squeue-json.out"))}
    running = jobs[sbatch_id("sbatch-running")]
    assert running.state is JobState.RUNNING
    assert running.start_time and running.end_time is None
    assert attribution.parse(running.comment) == {
        "agent": "claude-code",
        "session": "5e3c1a2b-9f;x",
        "user": "root",
        "project": "chem",
        "job": "t-7",
    }
    held = jobs[sbatch_id("sbatch-held")]
    assert held.state is JobState.PENDING and held.reason == "JobHeldUser"
    begin = jobs[sbatch_id("sbatch-begin")]
    assert begin.state is JobState.PENDING and begin.reason == "BeginTime"
    ok = jobs[sbatch_id("sbatch-ok")]
    assert ok.state is JobState.COMPLETED and ok.exit_code == 0
    assert ok.time_limit_s == 300 and ok.cpus == 2 and ok.name == "tnt-ok"
    failed = jobs[sbatch_id("sbatch-fail")]
    assert failed.state is JobState.FAILED and failed.exit_code == 3
    cancelled = jobs[sbatch_id("sbatch-cancel")]
    assert cancelled.state is JobState.CANCELLED and cancelled.signal == 15


def test_squeue_22_array_tasks_are_named_by_master() -> None:
    master = sbatch_id("sbatch-array")
    tasks = [
        j for j in sp.parse_squeue_json(read(V22 / "squeue-json.out")) if j.parent_id == master
    ]
    assert sorted(t.job_id for t in tasks) == [f"{master}_0", f"{master}_1", f"{master}_2"]
    assert sp.aggregate_state(t.state for t in tasks) is JobState.COMPLETED


def test_squeue_22_timeout_after_the_limit() -> None:
    jobs = {j.job_id: j for j in sp.parse_squeue_json(read(V22 / "squeue-json-finished.out"))}
    timeout = jobs[sbatch_id("sbatch-timeout")]
    assert timeout.state is JobState.TIMEOUT and timeout.reason == "TimeLimit"
    assert timeout.time_limit_s == 60


def test_squeue_22_ignores_the_job_filter() -> None:
    """22.05 `squeue --json -j N` still prints every job: callers must filter."""
    jobs = sp.parse_squeue_json(read(V22 / "squeue-jfilter-json.out"))
    assert len({j.job_id for j in jobs}) > 1


def test_squeue_down_is_backend_unavailable_even_with_exit_0() -> None:
    line = next(
        ln for ln in read(V22 / "commands.txt").splitlines() if ln.startswith("down-squeue ")
    )
    assert "rc=0" in line  # the reason the JSON must be read for errors
    with pytest.raises(errors.BackendUnavailable) as info:
        sp.parse_squeue_json(read(V22 / "down-squeue.out"))
    assert info.value.retryable
    with pytest.raises(errors.BackendUnavailable):
        sp.parse_squeue_json(read(V24 / "squeue-json-down.out"))


def test_squeue_24_shape() -> None:
    jobs = {j.job_id: j for j in sp.parse_squeue_json(read(V24 / "squeue-json.out"))}
    assert jobs["333"].state is JobState.COMPLETED and jobs["333"].exit_code == 0
    assert jobs["333"].time_limit_s == math.inf
    assert jobs["333"].start_time == 1746693312
    run = jobs["334"]
    assert run.state is JobState.RUNNING and run.time_limit_s == 3600 and run.end_time is None
    assert attribution.parse(run.comment) == {
        "agent": "codex",
        "session": "th-9",
        "user": "qc-rest",
        "job": "t-3",
    }
    assert jobs["335"].state is JobState.PENDING and jobs["335"].reason == "Resources"
    assert jobs["335"].start_time is None
    assert jobs["336"].state is JobState.FAILED and jobs["336"].exit_code == 3
    assert jobs["337"].state is JobState.TIMEOUT and jobs["337"].signal == 15
    assert jobs["341"].state is JobState.RUNNING  # ["RUNNING", "COMPLETING"]
    sweep = [j for j in jobs.values() if j.parent_id == "338"]
    assert {j.job_id for j in sweep} == {"338_0", "338_1", "338_[2-3]"}
    assert sp.aggregate_state(j.state for j in sweep) is JobState.RUNNING


# --- sacct ----------------------------------------------------------------------


def test_sacct_json_22() -> None:
    jobs = {j.job_id: j for j in sp.parse_sacct_json(read(V22 / "sacct-json.out"))}
    ok = jobs[sbatch_id("sbatch-ok")]
    assert ok.state is JobState.COMPLETED
    assert attribution.parse(ok.comment) is not None
    master = sbatch_id("sbatch-array")
    assert {f"{master}_0", f"{master}_1", f"{master}_2"} <= set(jobs)
    (timeout,) = sp.parse_sacct_json(read(V22 / "sacct-json-timeout.out"))
    # 22.05's JSON exit code lags the state right after the end: read the state
    assert timeout.state is JobState.TIMEOUT


def test_sacct_json_24() -> None:
    jobs = {j.job_id: j for j in sp.parse_sacct_json(read(V24 / "sacct-json.out"))}
    assert jobs["26"].state is JobState.COMPLETED and jobs["26"].exit_code == 0
    assert jobs["26"].time_limit_s == math.inf
    failed = jobs["27"]
    assert failed.state is JobState.FAILED and failed.exit_code == 3
    assert attribution.parse(failed.comment)["session"] == "s-1"  # type: ignore[index]
    assert jobs["28"].state is JobState.TIMEOUT and jobs["28"].signal == 15
    assert jobs["29_1"].array_job_id == "29"
    assert jobs["31"].state is JobState.CANCELLED


def test_sacct_parsable2_wide_with_header() -> None:
    rows = sp.parse_sacct_parsable(read(V22 / "sacct-parsable2.out"))
    header = read(V22 / "sacct-parsable2.out").splitlines()[0].split("|")
    assert all(set(r) == set(header) for r in rows)
    by_id = {r["JobID"]: r for r in rows}
    ok = by_id[sbatch_id("sbatch-ok")]
    assert attribution.parse(ok["Comment"])["job"] == "t-7"  # type: ignore[index]
    assert "cpu=2" in ok["AllocTRES"] and ok["SubmitLine"].startswith("sbatch ")
    assert f"{sbatch_id('sbatch-ok')}.batch" in by_id  # steps are rows too
    job = sp.sacct_row_job(by_id[sbatch_id("sbatch-fail")])
    assert job.state is JobState.FAILED and job.exit_code == 3 and job.signal is None
    assert job.submit_time and job.end_time and job.end_time >= job.submit_time


def test_sacct_parsable2_timeout_and_noheader() -> None:
    rows = sp.parse_sacct_parsable(read(V22 / "sacct-parsable2-timeout.out"))
    job = sp.sacct_row_job(rows[0])
    assert job.state is JobState.TIMEOUT and job.time_limit_s == 60
    rows = sp.parse_sacct_parsable(
        read(V22 / "sacct-noheader.out"), fields=("JobID", "State", "ExitCode")
    )
    assert rows and all(r["State"] for r in rows)


def test_sacct_parsable2_keeps_pipes_inside_the_submit_line() -> None:
    header = "JobID|State|SubmitLine|WorkDir"
    rows = sp.parse_sacct_parsable(f"{header}\n7|COMPLETED|sbatch --wrap=a|b x.sh|/tmp\n")
    assert rows == [
        {
            "JobID": "7",
            "State": "COMPLETED",
            "SubmitLine": "sbatch --wrap=a|b x.sh",
            "WorkDir": "/tmp",
        }
    ]


def test_cancelled_by_uid_state_text() -> None:
    assert sp.map_state("CANCELLED by 0") is JobState.CANCELLED
    assert sp.map_state(["PENDING", "REQUEUE_HOLD"]) is JobState.PENDING
    assert sp.map_state("CG") is JobState.RUNNING
    assert sp.map_state("WHATEVER") is JobState.UNKNOWN


# --- sinfo / scontrol -----------------------------------------------------------------


def test_sinfo_json_22_nodes_and_partitions_from_scontrol() -> None:
    info = sp.parse_sinfo_json(read(V22 / "sinfo-json.out"))
    assert info["version"] == "22.05.8"
    (node,) = info["nodes"]
    assert node["name"] == "tnode1" and node["cpus"] == 32 and node["gpus"] == 2
    assert set(node["partitions"]) == {"debug", "gpu"}
    parts = {
        p["name"]: p
        for p in sp.parse_partitions(read(V22 / "scontrol-show-partition-oneliner.out"))
    }
    assert parts["debug"]["default"] and not parts["gpu"]["default"]
    assert parts["debug"]["max_time_s"] == 3600 and parts["gpu"]["max_time_s"] == 1800
    assert parts["gpu"]["default_time_s"] == 300


def test_sinfo_json_24_shape() -> None:
    info = sp.parse_sinfo_json(read(V24 / "sinfo-json.out"))
    assert info["version"] == "24.05.3"
    nodes = {n["name"]: n for n in info["nodes"]}
    assert set(nodes) == {"node01", "node02", "node03", "gpu01"}
    assert nodes["node01"]["state"] == "mixed" and nodes["node01"]["cpus"] == 128
    assert nodes["gpu01"]["gpus"] == 4 and nodes["gpu01"]["reason"] == "bad gpu"
    parts = {p["name"]: p for p in info["partitions"]}
    assert parts["cpu"]["default"] and parts["cpu"]["max_time_s"] == 1440 * 60
    assert parts["gpu"]["state"] == "UP" and parts["gpu"]["default_time_s"] == 30 * 60


def test_sinfo_down() -> None:
    with pytest.raises(errors.BackendUnavailable):
        sp.parse_sinfo_json(read(V22 / "down-sinfo.out"))


def test_scontrol_show_job_multiline_and_oneliner_agree() -> None:
    (multi,) = sp.parse_scontrol(read(V22 / "scontrol-show-job-running.out"))
    (one,) = sp.parse_scontrol(read(V22 / "scontrol-show-job-oneliner.out"))
    assert multi["JobId"] == one["JobId"] == sbatch_id("sbatch-running")
    assert multi["JobState"] == "RUNNING"
    assert multi["Command"].endswith("sleep.sh 300")  # a value with a space
    assert attribution.parse(multi["Comment"]) is not None
    assert set(multi) - {"Power"} <= set(one) | {"Power"}


# --- values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:10:00", 600),
        ("1-02:00:00", 93600),
        ("05:30", 330),
        ("00:00.002", 0.002),
        ("10", 600),
        ("UNLIMITED", math.inf),
        ("", None),
        ("Unknown", None),
    ],
)
def test_durations(text: str, seconds: float | None) -> None:
    assert sp.parse_duration(text) == seconds


def test_slurm_minutes_round_up() -> None:
    assert sp.slurm_minutes(1) == "00:01:00"
    assert sp.slurm_minutes(61) == "00:02:00"
    assert sp.slurm_minutes(90000) == "1-01:00:00"


def test_expand_path() -> None:
    kw = {"job_id": "42", "name": "train", "user": "ana", "cwd": "/w"}
    assert sp.expand_path("%x-%j.out", **kw) == "/w/train-42.out"
    assert sp.expand_path("/o/%A_%a.out", **kw) == "/o/42_%a.out"
    assert sp.expand_path("/o/%5j-%u-100%%.log", **kw) == "/o/00042-ana-100%.log"


# --- errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "kind", "reason"),
    [
        ("err-sbatch-partition", errors.SubmissionRejected, "invalid_partition"),
        ("err-sbatch-timelimit", errors.SubmissionRejected, "time_limit"),
        ("err-sbatch-cpus", errors.SubmissionRejected, "node_config"),
        ("err-sbatch-mem", errors.SubmissionRejected, "memory"),
        ("err-sbatch-gres", errors.SubmissionRejected, "node_config"),
        ("err-sbatch-gres-name", errors.SubmissionRejected, "gres"),
        ("err-sbatch-qos", errors.SubmissionRejected, "invalid_qos"),
        ("err-sbatch-qos-wall", errors.SubmissionRejected, "qos_limit"),
        ("err-sbatch-qos-jobs", errors.SubmissionRejected, "qos_limit"),
        ("err-sbatch-account", errors.SubmissionRejected, "invalid_account"),
        ("err-sbatch-array", errors.SubmissionRejected, "array"),
        ("err-sbatch-time-format", errors.UsageError, "time_format"),
        ("err-sbatch-noscript", errors.UsageError, "script_missing"),
        ("err-sbatch-option", errors.UsageError, "option"),
        ("err-scontrol-invalid", errors.NotFound, "invalid_job"),
        ("err-scancel-invalid-verbose", errors.NotFound, "invalid_job"),
    ],
)
def test_recorded_errors_become_actionable(
    fixture: str, kind: type[errors.TenantryError], reason: str
) -> None:
    e = sp.error_from("sbatch", err(fixture), 1, partition="nope", time="02:00:00", account="nope")
    assert type(e) is kind
    assert e.details["reason"] == reason
    assert e.hint and "Slurm:" in e.message


def test_partition_error_names_the_partition() -> None:
    e = sp.error_from("sbatch", err("err-sbatch-partition"), 1)
    assert "nope" in e.message and "tenantry info" in (e.hint or "")


@pytest.mark.parametrize(
    "fixture",
    ["down-sbatch", "down-scancel", "down-scontrol", "down-sacct-dbd", "down-sacct-dbd-parsable"],
)
def test_controller_or_database_down_is_retryable(fixture: str) -> None:
    e = sp.error_from("sbatch", err(fixture), 1)
    assert isinstance(e, errors.BackendUnavailable) and e.retryable


def test_unknown_error_is_a_backend_error_with_the_text() -> None:
    e = sp.error_from("sbatch", "sbatch: error: something new\n", 1)
    assert type(e) is errors.BackendError and "something new" in e.message


def test_number_shapes() -> None:
    assert sp.number(5) == 5
    assert sp.number(None) is None
    assert sp.number({"set": True, "infinite": False, "number": 7}) == 7
    assert sp.number({"set": False, "infinite": False, "number": 0}) is None
    assert sp.number({"set": False, "infinite": True, "number": 0}) == math.inf
