"""Slurm's job completion log (jobcomp/filetxt) as a report input."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tenantry.report.ingest_jobcomp import looks_like, parse_line, read_jobcomp
from tenantry.report.sources import load, sniff

# the layout of slurmctld's JOB_FORMAT (src/plugins/jobcomp/filetxt), one record a line
LINES = [
    "JobId=101 UserId=alice(1000) GroupId=alice(1000) Name=train model JobState=COMPLETED "
    "Partition=gpu TimeLimit=60 StartTime=2026-12-06T10:00:00 EndTime=2026-12-06T11:30:00 "
    "NodeList=n1 NodeCnt=1 ProcCnt=8 WorkDir=/home/alice/my proj ReservationName= "
    "Tres=cpu=8,mem=16G,node=1,billing=8,gres/gpu=2 Account=chem QOS=normal WcKey= "
    "Cluster=c1 SubmitTime=2026-12-06T09:59:00 EligibleTime=2026-12-06T09:59:00 "
    "DerivedExitCode=0:0 ExitCode=0:0 ",
    "JobId=103 UserId=bob(1001) GroupId=bob(1001) Name=arr JobState=FAILED Partition=cpu "
    "TimeLimit=UNLIMITED StartTime=2026-12-06T10:00:00 EndTime=2026-12-06T10:00:05 "
    "NodeList=n2 NodeCnt=1 ProcCnt=1 WorkDir=/tmp ReservationName= Tres=cpu=1,node=1 "
    "Account=phys QOS=normal WcKey= Cluster=c1 SubmitTime=2026-12-06T09:00:00 "
    "EligibleTime=2026-12-06T09:00:00 ArrayJobId=102 ArrayTaskId=1 DerivedExitCode=0:0 "
    "ExitCode=1:0 ",
    "JobId=104 UserId=bob(1001) GroupId=bob(1001) Name=x JobState=CANCELLED Partition=cpu "
    "TimeLimit=10 StartTime=Unknown EndTime=2026-12-06T10:00:05 NodeList=(null) NodeCnt=0 "
    "ProcCnt=0 WorkDir=/tmp ReservationName= Tres= Account=phys QOS=normal WcKey= Cluster=c1 "
    "SubmitTime=2026-12-06T09:00:00 EligibleTime=2026-12-06T09:00:00 HetJobId=104 "
    "HetJobOffset=0 DerivedExitCode=0:0 ExitCode=0:0 ",
]


def test_fields_split_at_known_keys_so_spaces_in_values_survive() -> None:
    rec = parse_line(LINES[0])
    assert rec is not None
    assert (rec["jobname"], rec["workdir"]) == ("train model", "/home/alice/my proj")
    assert (rec["user"], rec["uid"], rec["alloccpus"]) == ("alice", "1000", "8")
    assert rec["alloctres"] == "cpu=8,mem=16G,node=1,billing=8,gres/gpu=2"
    assert rec["elapsedraw"] == "5400"
    assert rec["jobid"] == "101"


def test_array_tasks_and_het_components_get_sacct_job_ids() -> None:
    arr, het = parse_line(LINES[1]), parse_line(LINES[2])
    assert arr is not None and het is not None
    assert arr["jobid"] == "102_1" and het["jobid"] == "104+0"
    assert het["start"] == "" and het["elapsedraw"] == ""


def test_read_detect_and_load(tmp_path: Path) -> None:
    log = tmp_path / "jobcomp.log"
    log.write_text("\n".join(LINES) + "\nnot a record\n")
    assert looks_like(log.read_text()) and sniff(log) == "jobcomp"
    d = read_jobcomp(log)
    jobs = d.jobs.sort("job_id")
    assert jobs["job_id"].to_list() == ["101", "102_1", "104+0"]
    assert jobs["gpus"].to_list() == [2, 0, 0]
    assert jobs["elapsed_s"].to_list() == [5400, 5, 0]
    assert jobs.filter(pl.col("job_id") == "104+0")["start"].to_list() == [None]
    assert [u.line for u in d.stats[0].unreadable] == [4]
    assert any("behaviour only" in n for n in d.stats[0].notes)
    assert load([log]).jobs.height == 3


def test_local_times_shift_with_the_dump_zone(tmp_path: Path) -> None:
    log = tmp_path / "jobcomp.log"
    log.write_text(LINES[0] + "\n")
    utc = read_jobcomp(log).jobs["start"][0]
    berlin = read_jobcomp(log, tz="Europe/Berlin").jobs["start"][0]
    assert (utc - berlin).total_seconds() == 3600


@pytest.mark.parametrize(
    "text",
    ["JobID|User|State\n1|a|COMPLETED\n", "; UnixStartTime: 0\n", "JobId=1 something else\n"],
)
def test_other_formats_are_not_taken_for_it(text: str) -> None:
    assert not looks_like(text)


def test_a_recorded_log_gives_the_jobs_sacct_gives(fixtures: Path) -> None:
    """The real log of Slurm 22.05 and the sacct dump of the same jobs (record-jobcomp.sh):
    a name with spaces, an array's two tasks, a failure, a GPU job, one cancelled while
    pending; the same job ids, states, times, CPUs and GPUs."""
    log, dump = fixtures / "jobcomp.log", fixtures / "jobcomp_sacct.txt"
    assert sniff(log) == "jobcomp" and sniff(dump) == "sacct"
    a, b = load([log]).jobs, load([dump]).jobs
    cols = ["job_id", "submission_id", "user", "partition", "name", "state", "submit",
            "start", "end", "elapsed_s", "gpus", "exit_code"]  # fmt: skip
    assert a.select(cols).sort("job_id").equals(b.select(cols).sort("job_id"))
    started = pl.col("start").is_not_null()
    assert a.filter(started).sort("job_id")["cpus"].equals(b.filter(started).sort("job_id")["cpus"])
    assert "jc name with spaces" in a["name"].to_list()
    assert a.filter(pl.col("name") == "jc-cancel")["start"].to_list() == [None]
