"""Readers for what facilities have, combined honestly; an empty read is an error."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from tenantry.core.errors import IngestError
from tenantry.report import classify, ingest_sacct, metrics, sources
from tenantry.report.ingest_sacct import read_sacct
from tenantry.report.ingest_swf import read_swf

from .conftest import write

ROOT = Path(__file__).resolve().parents[2]


# --- sacct --format=ALL ------------------------------------------------------------


def test_real_format_all_dump_of_22_05(fixtures: Path) -> None:
    """Recorded: header starts with Account (109 fields), | and newline inside fields."""
    p = fixtures / "sacct_all.txt"
    header = p.read_text().split("\n", 1)[0].split("|")
    assert header[0] == "Account" and len(header) >= 107
    assert sources.sniff(p) == "sacct"
    d = read_sacct(p)
    assert d.stats[0].unreadable == [] and d.jobs.height == 5
    by_name = {r["name"]: r for r in d.jobs.iter_rows(named=True)}
    assert set(by_name) == {
        "rpt-all-direct",
        "rpt-all-agent",
        "rpt-all-tenantry",
        "rpt-all|pipe",
        "rpt-all-multi\nline",
    }
    pipe = by_name["rpt-all|pipe"]
    assert pipe["comment"] == "left|right"
    assert pipe["submit_line"].endswith("--wrap echo a | tr a b")
    assert by_name["rpt-all-agent"]["admin_comment"].endswith("markers=CLAUDECODE")
    ev = classify.job_evidence(d.jobs)
    basis = dict(zip(ev["name"], ev["job_basis"], strict=True))
    assert basis["rpt-all-agent"] == "controller" and basis["rpt-all-tenantry"] == "tag"
    direct = dict(zip(ev["name"], ev["job_direct"], strict=True))
    assert direct["rpt-all-direct"] == "human" and direct["rpt-all-agent"] == "agent"


# Slurm 24.x --format=ALL: the 22.05 names with Reserved/ResvCPU/ResvCPURAW renamed
# Planned/PlannedCPU/PlannedCPURAW and the fields 23.02-24.11 added (sacct(1), 24.11).
ADDED_24 = ["Extra", "FailedNode", "Licenses", "QOSREQ", "StdErr", "StdIn", "StdOut"]
RENAMED_24 = {"Reserved": "Planned", "ResvCPU": "PlannedCPU", "ResvCPURAW": "PlannedCPURAW"}


def header_24(fixtures: Path) -> list[str]:
    real = (fixtures / "sacct_all.txt").read_text().split("\n", 1)[0].split("|")
    names = [RENAMED_24.get(n, n) for n in real] + ADDED_24
    return sorted(names, key=str.lower)


def row_24(header: list[str], **cells: str) -> str:
    base = {
        "Account": "chem",
        "Cluster": "big",
        "User": "ana",
        "JobID": "901",
        "JobIDRaw": "901",
        "JobName": "md",
        "Submit": "2026-03-02T10:00:00",
        "Eligible": "2026-03-02T10:00:00",
        "Start": "2026-03-02T10:00:05",
        "End": "2026-03-02T11:00:05",
        "Elapsed": "01:00:00",
        "ElapsedRaw": "3600",
        "AllocCPUS": "8",
        "NCPUS": "8",
        "State": "COMPLETED",
        "AllocTRES": "billing=8,cpu=8,node=1",
        "SubmitLine": "sbatch md.sh",
        "WorkDir": "/home/ana",
    }
    base.update(cells)
    return "|".join(base.get(h, "") for h in header)


def test_format_all_of_24x_with_pipes_and_newlines(
    fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    header = header_24(fixtures)
    assert len(header) >= 107 and header[0] == "Account"
    rows = [
        row_24(header, JobID="901", JobIDRaw="901", Constraints="fa|fb"),
        row_24(
            header,
            JobID="902",
            JobIDRaw="902",
            JobName="two\nlines",
            SubmitLine="sbatch -J two --wrap=make | tee log",
        ),
        row_24(header, JobID="903", JobIDRaw="903", Comment="see | here", StdOut="/o/%j"),
        # both neighbours non-empty: the submit line tells which one holds the "|"
        row_24(
            header,
            JobID="904",
            JobIDRaw="904",
            Comment="note",
            Constraints="fa|fb",
            SubmitLine="sbatch -C fa|fb --comment note md.sh",
        ),
    ]
    text = "|".join(header) + "\n" + "\n".join(rows * 40) + "\n"
    p = write(tmp_path, "all24.txt", text)
    # small blocks: the cut must find record starts though the line starts with Account
    monkeypatch.setattr(ingest_sacct, "BLOCK", 4096)
    layout, _ = ingest_sacct.layout_of(text.split("\n", 1)[0])
    blocks = [b for b, _ in ingest_sacct._blocks(p, layout, None)]
    # bounded memory: many blocks, none much larger than BLOCK (a record is ~700 bytes)
    assert len(blocks) > 5 and max(len(b) for b in blocks) < 2 * 4096
    d = read_sacct(p)
    assert d.stats[0].unreadable == [] and d.jobs.height == 160
    got = d.jobs.unique("job_id").sort("job_id")
    assert got["job_id"].to_list() == ["901", "902", "903", "904"]
    assert got["name"].to_list() == ["md", "two\nlines", "md", "md"]
    assert got["comment"].to_list() == ["", "", "see | here", "note"]
    assert got["submit_line"][1] == "sbatch -J two --wrap=make | tee log"
    assert got["cpus"].to_list() == [8, 8, 8, 8]


def test_header_without_jobid_is_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "h.txt", "Account|User|Submit\nchem|ana|2026-03-02T10:00:00\n")
    with pytest.raises(IngestError, match="no JobID"):
        read_sacct(p)


# --- SWF and extended SWF -----------------------------------------------------------

T_ABS = 1_700_000_000  # 2023-11-14, absolute epoch seconds


def ext_line(job: int, submit: int, *, user: int = 1, nodes: str = "n[1-2]") -> str:
    std = [job, submit, 5, 600, 4, -1, -1, 4, 3600, -1, 1, user, 1, 1, 1, 1, -1, -1]
    return " ".join(str(x) for x in std) + f" {nodes} batch x86"


def test_extended_swf_21_columns_no_header_absolute_times(tmp_path: Path) -> None:
    lines = [ext_line(1, T_ABS), ext_line(2, T_ABS + 60, user=2), "1 2 3 broken", ""]
    lines.append(ext_line(3, T_ABS + 120))
    p = write(tmp_path, "sim.swf", "\n".join(lines) + "\n")
    assert sources.sniff(p) == "swf"
    d = read_swf(p)
    st = d.stats[0]
    assert st.kind == "swf-extended"
    assert [(u.line, u.reason) for u in st.unreadable] == [(3, "expected 21 fields, got 4")]
    assert d.jobs.height == 3
    assert d.jobs["submit"][0] == datetime.fromtimestamp(T_ABS, tz=UTC)
    assert d.jobs["extra"].to_list() == ["n[1-2] batch x86"] * 3
    assert any("absolute" in n for n in st.notes)


def test_swf_forced_on_a_sacct_dump_is_an_error_with_every_line(fixtures: Path) -> None:
    with pytest.raises(IngestError, match="read no records") as err:
        sources.load([fixtures / "sacct_all.txt"], kind="swf")
    assert "line 1" in str(err.value)


def test_empty_read_exits_non_zero_with_a_hint(tmp_path: Path) -> None:
    p = write(tmp_path, "empty.txt", "JobID|User|Submit\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-m", "tenantry", "report", str(p)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert out.returncode == 65, out
    assert "read no records" in out.stderr and "hint" in out.stderr


# --- combining inputs --------------------------------------------------------------


def test_same_dump_twice_counts_once(fixtures: Path) -> None:
    p = fixtures / "sacct_wide.txt"
    one = metrics.build(sources.load([p]))
    twice_data = sources.load([p, p])
    twice = metrics.build(twice_data)
    for key in ("users", "submissions", "core_hours", "gpu_hours"):
        assert twice["headline"][key]["total"] == one["headline"][key]["total"], key
    assert twice["combined"]["duplicates_dropped"] == one["inputs"][0]["records"]
    assert twice["inputs"][1]["duplicates_dropped"] == one["inputs"][0]["records"]


def test_two_traces_never_merge_users_or_job_ids(tmp_path: Path) -> None:
    a = write(tmp_path, "a.swf", "; Computer: alpha\n" + ext_line(1, T_ABS) + "\n")
    b = write(tmp_path, "b.swf", "; Computer: beta\n" + ext_line(1, T_ABS) + "\n")
    r = metrics.build(sources.load([a, b]))
    assert r["headline"]["users"]["total"] == 2
    assert r["headline"]["submissions"]["total"] == 2
    assert r["combined"]["namespaces"] == ["alpha", "beta"]
    assert r["combined"]["users_namespaced"] is True
    users = set(metrics.users_table(sources.load([a, b]))["user"])
    assert users == {"alpha/u1", "beta/u1"}


# --- time zone and DST --------------------------------------------------------------


def test_job_in_the_repeated_fall_back_hour_gets_its_core_hours(tmp_path: Path) -> None:
    # Europe/Berlin, 2026-10-25: 03:00 CEST -> 02:00 CET. Started 02:20 CEST, ended
    # 02:10 CET (50 min later): on the wall clock the end is before the start.
    header = "JobID|Cluster|User|Submit|Start|End|ElapsedRaw|AllocCPUS|State"
    row = "5|c|ana|2026-10-25T02:19:00|2026-10-25T02:20:00|2026-10-25T02:10:00|3000|6|COMPLETED"
    other = "6|c|ana|2026-10-25T09:00:00|2026-10-25T09:00:00|2026-10-25T10:00:00|3600|1|COMPLETED"
    p = write(tmp_path, "dst.txt", f"{header}\n{row}\n{other}\n")
    data = sources.load([p], tz="Europe/Berlin")
    r = metrics.build(data, tz="Europe/Berlin")
    assert r["headline"]["core_hours"]["total"] == pytest.approx(6 * 3000 / 3600 + 1.0)
    # a window opening during the run (00:30 UTC): 40 of its 50 minutes count
    since = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    until = datetime(2026, 10, 25, 8, 0, tzinfo=UTC)
    r2 = metrics.build(data, since, until, tz="Europe/Berlin")
    assert r2["headline"]["core_hours"]["total"] == pytest.approx(6 * 40 / 60)


def test_hours_are_local_to_the_facility(tmp_path: Path) -> None:
    # 15:00 UTC on a Wednesday is 09:00 in Chicago (CST): office hours, not night
    header = "JobID|Cluster|User|Submit|Start|End|ElapsedRaw|AllocCPUS|State"
    row = "7|c|ana|2026-01-07T15:00:00|2026-01-07T15:00:00|2026-01-07T16:00:00|3600|1|COMPLETED"
    p = write(tmp_path, "tz.txt", f"{header}\n{row}\n")
    data = sources.load([p])
    utc = metrics.build(data)
    local = metrics.build(data, tz="America/Chicago")
    assert utc["time_zone"]["zone"] == "UTC" and "default" in utc["time_zone"]["source"]
    assert local["time_zone"] == {"zone": "America/Chicago", "source": "setting (--tz)"}
    assert sum(local["hour_of_week"]["human"][2][9:10]) == 1
    assert sum(utc["hour_of_week"]["human"][2][15:16]) == 1


def test_swf_time_zone_header_is_the_facility_zone(tmp_path: Path) -> None:
    text = "; TimeZoneString: Europe/Berlin\n; UnixStartTime: 1767571200\n"
    text += " ".join(["1", "0", "5", "60", "1"] + ["-1"] * 5 + ["1", "3"] + ["1"] * 4 + ["-1"] * 2)
    p = write(tmp_path, "z.swf", text + "\n")
    r = metrics.build(sources.load([p]))
    assert r["time_zone"] == {"zone": "Europe/Berlin", "source": "trace header"}
    users = metrics.users_table(sources.load([p]))
    assert users.filter(pl.col("user") == "u3").height == 1


def test_swf_header_with_unknown_start_and_zone(tmp_path: Path) -> None:
    # header keys as some Slurm-to-SWF conversions write them: UNKNOWN start and zone,
    # absolute epoch submit times
    head = "; Version: 2.2\n; UnixStartTime: UNKNOWN\n; TimeZoneString: UNKNOWN\n; MaxProcs: 64\n"
    std = [1, T_ABS, 5, 600, 4, -1, -1, 4, 3600, -1, 1, 7, 1, 1, 1, 1, -1, -1]
    p = write(tmp_path, "u.swf", head + " ".join(map(str, std)) + "\n")
    d = read_swf(p)
    assert d.stats[0].tz is None
    assert d.jobs["submit"][0] == datetime.fromtimestamp(T_ABS, tz=UTC)
    assert metrics.build(d)["time_zone"]["zone"] == "UTC"
