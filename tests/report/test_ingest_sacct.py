"""sacct --parsable2 parsing: recorded real dumps and the edge cases of the format."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from tenantry.core.errors import IngestError
from tenantry.report import ingest_sacct
from tenantry.report.ingest_sacct import XDMOD_FIELDS, read_sacct
from tenantry.report.sacct_repair import split_record

from .conftest import write


def xdmod_line(**over: str) -> str:
    base = {
        "jobid": "101",
        "jobidraw": "101",
        "cluster": "c1",
        "partition": "debug",
        "qos": "normal",
        "account": "acct",
        "group": "grp",
        "gid": "100",
        "user": "alice",
        "uid": "1000",
        "submit": "2026-01-05T10:00:00",
        "eligible": "2026-01-05T10:00:00",
        "start": "2026-01-05T10:00:05",
        "end": "2026-01-05T11:00:05",
        "elapsed": "01:00:00",
        "exitcode": "0:0",
        "state": "COMPLETED",
        "nnodes": "1",
        "ncpus": "4",
        "reqcpus": "4",
        "reqmem": "4G",
        "reqtres": "billing=4,cpu=4,node=1",
        "alloctres": "billing=4,cpu=4,node=1",
        "timelimit": "02:00:00",
        "nodelist": "n1",
        "jobname": "train",
    }
    base.update(over)
    return "|".join(base[f] for f in XDMOD_FIELDS)


# --- recorded real outputs --------------------------------------------------------


def _real(fixtures: Path, name: str) -> Path:
    p = fixtures / name
    if not p.exists():
        pytest.fail(f"missing recorded fixture {p}; run tests/fixtures/report/record.sh")
    return p


def test_real_xdmod_dump_reads_every_line(fixtures: Path) -> None:
    p = _real(fixtures, "sacct_xdmod.txt")
    d = read_sacct(p)
    st = d.stats[0]
    assert st.unreadable == []
    lines = [x for x in p.read_text().split("\n") if x.startswith(tuple("0123456789"))]
    # every physical record line became a row (multi-line names are joined)
    assert d.jobs.height == len(lines)
    jobs = d.jobs
    assert jobs["user"].drop_nulls().n_unique() >= 1
    assert set(jobs["state"].to_list()) >= {"COMPLETED", "FAILED"}
    # arrays: three tasks, one submission
    arr = jobs.filter(pl.col("name") == "rpt-array")
    assert arr.height == 3 and arr["submission_id"].n_unique() == 1
    # het job: components +0 and +1 share one submission
    het = jobs.filter(pl.col("name") == "rpt-het")
    assert het.height == 2 and het["submission_id"].n_unique() == 1
    assert sorted(j.split("+")[1] for j in het["job_id"]) == ["0", "1"]
    # a name holding '|' survives intact
    assert "rpt-pipe|name" in jobs["name"].to_list()


def test_real_xdmod_gpus_and_core_seconds(fixtures: Path) -> None:
    jobs = read_sacct(_real(fixtures, "sacct_xdmod.txt")).jobs
    gpu = jobs.filter(pl.col("name") == "rpt-gpu2")
    assert gpu.height == 1 and gpu["gpus"][0] == 2 and gpu["cpus"][0] == 4
    cancelled = jobs.filter(pl.col("name") == "rpt-cancel")
    assert cancelled["start"][0] is None and cancelled["elapsed_s"][0] == 0


def test_real_wide_dump_with_header_has_tags_and_submit_lines(fixtures: Path) -> None:
    d = read_sacct(_real(fixtures, "sacct_wide.txt"))
    assert d.stats[0].unreadable == []
    jobs = d.jobs
    tagged = jobs.filter(pl.col("comment").str.contains("tenantry:v1", literal=True))
    assert tagged.height >= 5
    assert jobs.filter(pl.col("submit_line").str.contains("--wrap", literal=True)).height > 0
    # the wrap with a shell pipe kept its '|'
    assert any("| tr a b" in (s or "") for s in jobs["submit_line"].to_list())


def test_real_requeue_shows_twice_and_counts_once(fixtures: Path) -> None:
    jobs = read_sacct(_real(fixtures, "sacct_wide.txt")).jobs
    rq = jobs.filter(pl.col("name") == "rpt-requeue")
    assert rq.height >= 2, "--duplicates keeps the requeued run"
    assert rq["submission_id"].n_unique() == 1
    assert "REQUEUED" in rq["state"].to_list()


def test_real_running_job_has_no_end(fixtures: Path) -> None:
    jobs = read_sacct(_real(fixtures, "sacct_wide.txt")).jobs
    run = jobs.filter(pl.col("name") == "rpt-running")
    assert run.height == 1
    assert run["state"][0] == "RUNNING" and run["end"][0] is None and run["elapsed_s"][0] > 0


def test_real_steps_are_skipped_and_counted(fixtures: Path) -> None:
    with_steps = read_sacct(_real(fixtures, "sacct_wide_steps.txt"))
    alloc = read_sacct(_real(fixtures, "sacct_wide.txt"))
    assert with_steps.stats[0].skipped_steps > 0
    assert with_steps.jobs.height == alloc.jobs.height


# --- edge cases -----------------------------------------------------------------


def test_array_ranges_het_and_steps(tmp_path: Path) -> None:
    text = "\n".join(
        [
            xdmod_line(jobid="123_1", jobidraw="124"),
            xdmod_line(
                jobid="123_[2-3]",
                jobidraw="123",
                start="Unknown",
                end="Unknown",
                state="PENDING",
                elapsed="00:00:00",
                nodelist="None assigned",
            ),
            xdmod_line(jobid="130+0", jobidraw="130"),
            xdmod_line(jobid="130+1", jobidraw="131", ncpus="8"),
            xdmod_line(jobid="130+1.0", jobidraw="131.0"),
        ]
    )
    d = read_sacct(write(tmp_path, "a.txt", text + "\n"))
    j = d.jobs
    assert j.height == 4 and d.stats[0].skipped_steps == 1
    assert j["submission_id"].n_unique() == 2
    assert j.filter(pl.col("job_id") == "123_[2-3]")["start"][0] is None


def test_pipe_in_jobname_and_newline_in_jobname(tmp_path: Path) -> None:
    text = "\n".join(
        [
            xdmod_line(jobid="1", jobname="a|b|c"),
            xdmod_line(jobid="2", jobname="first"),
            "second line of the name",
            xdmod_line(jobid="3"),
        ]
    )
    d = read_sacct(write(tmp_path, "p.txt", text + "\n"))
    names = dict(zip(d.jobs["job_id"], d.jobs["name"], strict=True))
    assert names == {"1": "a|b|c", "2": "first\nsecond line of the name", "3": "train"}
    assert d.stats[0].repaired == 2 and d.stats[0].unreadable == []


def test_pipe_in_submitline_with_header_layout(tmp_path: Path) -> None:
    header = "JobID|User|Submit|Start|End|ElapsedRaw|AllocCPUS|State|JobName|SubmitLine|WorkDir"
    row = (
        "7|bob|2026-01-05T10:00:00|2026-01-05T10:00:01|2026-01-05T10:00:11|10|2|COMPLETED|"
        "wrap|sbatch --wrap=a | b | c|/home/bob"
    )
    d = read_sacct(write(tmp_path, "w.txt", f"{header}\n{row}\n"))
    assert d.jobs["submit_line"][0] == "sbatch --wrap=a | b | c"
    assert d.jobs["name"][0] == "wrap"


def test_unreadable_lines_are_reported_with_line_numbers(tmp_path: Path) -> None:
    text = "\n".join([xdmod_line(jobid="1"), "42|truncated|record", xdmod_line(jobid="3")])
    d = read_sacct(write(tmp_path, "u.txt", text + "\n"))
    assert d.jobs.height == 2
    [bad] = d.stats[0].unreadable
    assert bad.line == 2 and "too few" in bad.reason and bad.text.startswith("42|")


def test_bad_typed_field_is_reported_not_guessed(tmp_path: Path) -> None:
    text = xdmod_line(jobid="1", submit="yesterday|noon")
    d = read_sacct(write(tmp_path, "t.txt", text + "\n"))
    # the extra '|' cannot be given to jobname without breaking the timestamps
    assert d.jobs.height == 0 and len(d.stats[0].unreadable) == 1


def test_dst_fall_back_local_times_use_elapsed_raw(tmp_path: Path) -> None:
    # Europe/Berlin leaves DST at 03:00 -> 02:00 on 2026-10-25: 2 h of run, 1 h on the clock
    line = xdmod_line(
        start="2026-10-25T01:30:00",
        end="2026-10-25T02:30:00",
        elapsed="02:00:00",
        submit="2026-10-25T01:29:00",
    )
    p = write(tmp_path, "dst.txt", line + "\n")
    d = read_sacct(p, tz="Europe/Berlin")
    row = d.jobs.row(0, named=True)
    assert row["start"] == datetime(2026, 10, 24, 23, 30, tzinfo=UTC)
    assert row["elapsed_s"] == 7200  # never end - start
    utc = read_sacct(p).jobs.row(0, named=True)
    assert utc["start"] == datetime(2026, 10, 25, 1, 30, tzinfo=UTC)


def test_elapsed_formats() -> None:
    df = pl.DataFrame({"e": ["1-02:03:04", "05:06", "00:10:00", "bad"]})
    from tenantry.report.slurm_fields import elapsed_seconds

    assert df.select(elapsed_seconds("e").alias("s"))["s"].to_list() == [93784, 306, 600, None]


def test_gpu_typed_and_untyped_counted_once() -> None:
    from tenantry.report.slurm_fields import gpus_from_tres, gpus_from_tres_text

    cases = {
        "cpu=4,gres/gpu:a100=2,gres/gpu=2,mem=4G": 2,
        "cpu=1,gres/gpu:a100=1,gres/gpu:v100=2": 3,
        "cpu=1,gres/gpu=4": 4,
        "cpu=1,mem=1G": 0,
        "": 0,
    }
    df = pl.DataFrame({"t": list(cases)})
    assert df.select(gpus_from_tres("t"))["t"].to_list() == list(cases.values())
    assert [gpus_from_tres_text(t) for t in cases] == list(cases.values())


def test_no_header_unknown_layout_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="field layout"):
        read_sacct(write(tmp_path, "x.txt", "1|2|3\n"))


def test_fields_option_gives_the_layout(tmp_path: Path) -> None:
    p = write(tmp_path, "f.txt", "9|carol|2026-01-05T10:00:00|2026-01-05T10:00:00|60|3|FAILED\n")
    d = read_sacct(
        p, fields=["JobID", "User", "Submit", "Start", "ElapsedRaw", "AllocCPUS", "State"]
    )
    assert d.jobs.row(0, named=True)["cpus"] == 3


def test_split_record_prefers_submitline_then_validates() -> None:
    layout = ["jobid", "jobname", "start", "submitline"]
    ts = "2026-01-05T10:00:00"
    assert split_record(f"1|n|{ts}|sbatch a|b", layout) == ["1", "n", ts, "sbatch a|b"]
    assert split_record(f"1|n|x|{ts}|sbatch a", layout) == ["1", "n|x", ts, "sbatch a"]
    assert split_record(f"1|n|{ts}|a|b", layout) is None  # not a submit line
    assert split_record("1|n", layout) is None


def test_split_record_pipes_in_two_adjacent_free_text_fields() -> None:
    # as recorded from Slurm 22.05: -J 'rpt-pipe|name' --wrap 'echo a | tr a b'
    layout = ["jobid", "jobname", "comment", "submitline", "workdir"]
    text = "63|rpt-pipe|name|tag|sbatch -J rpt-pipe|name --wrap echo a | tr a b|/work"
    assert split_record(text, layout) == [
        "63",
        "rpt-pipe|name",
        "tag",
        "sbatch -J rpt-pipe|name --wrap echo a | tr a b",
        "/work",
    ]


def test_blocks_cut_at_record_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_sacct, "BLOCK", 300)
    rows = [xdmod_line(jobid=str(i), jobname=f"n{i}\ncontinued") for i in range(1, 30)]
    d = read_sacct(write(tmp_path, "b.txt", "\n".join(rows) + "\n"))
    assert d.jobs.height == 29 and d.stats[0].unreadable == []
    assert set(d.jobs["name"]) == {f"n{i}\ncontinued" for i in range(1, 30)}


def test_line_with_right_separator_count_but_garbage_is_unreadable(tmp_path: Path) -> None:
    garbage = "|".join(["x"] * len(XDMOD_FIELDS))
    text = "\n".join([xdmod_line(jobid="1"), garbage, xdmod_line(jobid="3")])
    d = read_sacct(write(tmp_path, "g.txt", text + "\n"))
    assert d.jobs["job_id"].to_list() == ["1", "3"]
    [bad] = d.stats[0].unreadable
    assert bad.line == 2 and bad.reason == "fields do not validate"


@pytest.mark.parametrize(
    ("p", "P"),
    [
        ("sacct_parsable.txt", "sacct_parsable2.txt"),
        ("sacct_xdmod_parsable.txt", "sacct_xdmod_parsable2.txt"),
    ],
)
def test_parsable_with_a_delimiter_at_the_end_reads_as_parsable2(
    fixtures: Path, p: str, P: str
) -> None:
    """``sacct -p`` ends each record with ``|``: the same jobs as ``-P``, every line read
    (a job name holding ``|`` and one holding a newline included)."""
    a, b = read_sacct(_real(fixtures, p)), read_sacct(_real(fixtures, P))
    assert a.stats[0].unreadable == b.stats[0].unreadable == []
    assert a.jobs.height == b.jobs.height == 4
    cols = [c for c in a.jobs.columns if c != "source"]
    assert a.jobs.select(cols).equals(b.jobs.select(cols))
    assert {"p-pipe|name", "p-multi\nline"} <= set(a.jobs["name"].to_list())


def test_a_dump_without_the_fields_the_report_needs_says_so(fixtures: Path) -> None:
    """``sacct --long -p`` has no User, Submit or Start: read, and a note names them."""
    d = read_sacct(_real(fixtures, "sacct_long_parsable.txt"))
    assert d.jobs.height == 4 and d.stats[0].unreadable == []
    assert any("no User, Submit, Start field" in n for n in d.stats[0].notes)
    assert not read_sacct(_real(fixtures, "sacct_parsable2.txt")).stats[0].notes
