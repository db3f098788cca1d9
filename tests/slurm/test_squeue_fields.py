"""squeue's column output of named jobs (``squeue_fields``), on recorded 22.05 output.

The captures are ``record-22.05-fields.sh``'s: eight jobs (finished, failed with
``|`` in its name and comment, an array, a held array, a running tagged job, a
cancelled one, one whose name holds the unit separator, one named ``None``), and
every user's jobs with another user's held job among them (the facility poller's).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenantry.backends import slurm_parse as sp
from tenantry.backends import squeue_fields as sf
from tenantry.core import errors
from tenantry.core.models import JobState

V22 = Path(__file__).parent.parent / "fixtures" / "slurm" / "22.05"


def ids() -> list[str]:
    return (V22 / "squeue-fields.ids").read_text().split()


def jobs(name: str = "squeue-fields") -> dict[str, sp.SlurmJob]:
    return {j.job_id: j for j in sf.parse((V22 / f"{name}.out").read_text())}


def test_the_recorded_jobs_in_every_state() -> None:
    ok, fail, array, held, running, cancel, odd, begin, _theirs = ids()
    got = jobs()
    assert got[ok].state is JobState.COMPLETED and got[ok].exit_code == 0
    assert got[ok].name == "tnt-f-ok" and got[ok].comment == "" and got[ok].nodes
    assert got[ok].end_time is not None and got[ok].start_time is not None
    assert got[ok].user == "root" and got[ok].account == "root"
    assert got[fail].state is JobState.FAILED and got[fail].exit_code == 3
    assert got[fail].name == "tnt-f|fail" and got[fail].comment == "a|b c"
    assert got[fail].reason == "NonZeroExitCode"
    assert got[cancel].state is JobState.CANCELLED
    assert got[running].state is JobState.RUNNING and got[running].end_time is None
    assert got[running].comment == "tenantry:v1;agent=codex;job=t-9"
    assert got[begin].state is JobState.PENDING and got[begin].name == "None"
    assert got[begin].reason == "BeginTime" and got[begin].nodes == ""
    tasks = [j for j in got.values() if j.array_job_id == array]
    assert sorted(j.job_id for j in tasks) == [f"{array}_{k}" for k in range(3)]
    assert all(j.state is JobState.COMPLETED for j in tasks)
    rest = got[f"{held}_[1-5%2]"]
    assert rest.state is JobState.PENDING and rest.array_task == "1-5%2"
    assert rest.reason == "JobHeldUser" and rest.start_time is None
    # the name holding the separator does not parse: that job is left to sacct
    assert odd not in got and len(got) == 9


@pytest.fixture
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")  # the ISO capture was printed in UTC
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_local_iso_times_read_as_the_epoch_ones(utc: None) -> None:
    epoch, iso = jobs(), jobs("squeue-fields-iso")
    assert epoch.keys() == iso.keys()
    for key, job in epoch.items():
        other = iso[key]
        assert (job.submit_time, job.start_time, job.end_time) == (
            other.submit_time,
            other.start_time,
            other.end_time,
        ), key


def test_every_users_jobs_with_their_owners() -> None:
    *mine, theirs = ids()
    got = jobs("squeue-fields-all")
    assert got[theirs].user == "tt-rec-other" and got[theirs].account == "root"
    assert got[theirs].state is JobState.PENDING and got[theirs].reason == "JobHeldUser"
    assert {got[i].user for i in mine if i in got} == {"root"}
    argv = sf.argv_all()
    assert "--me" not in argv and "--all" in argv and "--states=all" in argv


def test_argv_names_the_jobs_and_asks_for_every_state() -> None:
    argv = sf.argv(["41", "42_3"])
    assert argv[:5] == ["squeue", "--noheader", "--me", "--all", "--states=all"]
    assert "--jobs=41,42_3" in argv and "--json" not in argv
    fmt = argv[-1].removeprefix("--Format=").split(",")
    assert [f.split(":")[0] for f in fmt] == list(sf.FIELDS)
    assert all(f.endswith(sf.UNIT) for f in fmt[:-1]) and fmt[-1].endswith(sf.RECORD)
    many = sf.argv([str(i) for i in range(sf.MAX_IDS + 1)])
    assert not any(a.startswith("--jobs=") for a in many) and "--me" in many


def test_unknown_ids_and_a_down_controller_are_told_apart() -> None:
    unknown = (V22 / "err-squeue-fields-unknown.err").read_text()
    assert sf.UNKNOWN_IDS in unknown.lower()
    down = (V22 / "down-squeue-fields.err").read_text()
    assert sf.UNKNOWN_IDS not in down.lower()
    e = sp.error_from("squeue", down, 1)
    assert isinstance(e, errors.BackendUnavailable) and e.retryable


def test_garbage_and_partial_records_are_left_out() -> None:
    assert sf.parse("") == []
    assert sf.parse("squeue: warning: something\n") == []
    one = (V22 / "squeue-fields.out").read_text().split(sf.RECORD)[0] + sf.RECORD
    assert len(sf.parse(one + "cut\x1fshort")) == 1
    (job,) = sf.parse("CLUSTER: tenantry\n" + one)  # a multi-cluster listing's line
    assert job.job_id == one.split(sf.UNIT)[0]
