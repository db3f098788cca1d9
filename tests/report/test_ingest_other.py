"""sacct --json, SWF and Tenantry telemetry ingest."""

from __future__ import annotations

import json
import sqlite3
from importlib import resources
from pathlib import Path

import polars as pl
import pytest

from tenantry.core.errors import IngestError
from tenantry.report import sources
from tenantry.report.ingest_json import gpus_of, num, parse_jobs, read_json
from tenantry.report.ingest_swf import parse_header, read_swf
from tenantry.report.ingest_telemetry import read_telemetry

from .conftest import write

# --- sacct --json ---------------------------------------------------------------


def test_real_sacct_json_matches_the_parsable_dump(fixtures: Path) -> None:
    p = fixtures / "sacct.json"
    if not p.exists():
        pytest.fail("missing recorded fixture; run tests/fixtures/report/record.sh")
    d = read_json(p)
    assert d.stats[0].unreadable == []
    from tenantry.report.ingest_sacct import read_sacct

    wide = read_sacct(fixtures / "sacct_wide.txt").jobs
    j = d.jobs
    assert j.height == wide.height
    assert sorted(j["job_id"].to_list()) == sorted(wide["job_id"].to_list())
    both = j.join(wide, on=["job_id", "state"], suffix="_w")
    assert both.height > 0
    assert (both["cpus"] == both["cpus_w"]).all()
    assert (both["gpus"] == both["gpus_w"]).all()
    tagged = j.filter(pl.col("comment").str.contains("tenantry:v1", literal=True))
    assert tagged.height >= 5


def test_json_2302_shape_with_wrapped_numbers() -> None:
    doc = {
        "jobs": [
            {
                "job_id": 12,
                "array": {"job_id": 10, "task_id": {"set": True, "infinite": False, "number": 2}},
                "het": {"job_id": 0, "job_offset": {"set": False, "infinite": False, "number": 0}},
                "user": "dora",
                "state": {"current": ["FAILED"], "reason": "None"},
                "time": {
                    "elapsed": 30,
                    "submission": 1767607200,
                    "start": 1767607205,
                    "end": 1767607235,
                },
                "tres": {
                    "allocated": [
                        {"type": "cpu", "name": "", "count": 8},
                        {"type": "gres", "name": "gpu:h100", "count": 2},
                    ]
                },
                "comment": {"job": "tenantry:v1;agent=codex"},
                "submit_line": "sbatch --wrap=x",
            }
        ]
    }
    rows, lost = parse_jobs(doc, "x.json")
    assert lost == []
    [r] = rows
    assert (r["job_id"], r["submission_id"], r["state"], r["cpus"], r["gpus"]) == (
        "10_2",
        ":10",
        "FAILED",
        8,
        2,
    )


def test_json_helpers() -> None:
    assert num({"set": True, "infinite": False, "number": 5}) == 5
    assert num({"set": False, "number": 5}) is None
    assert num({"set": True, "infinite": True, "number": 0}) is None
    alloc = {
        "allocated": [
            {"type": "gres", "name": "gpu", "count": 2},
            {"type": "gres", "name": "gpu:a100", "count": 2},
        ]
    }
    assert gpus_of(alloc) == 2


def test_json_not_sacct_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(IngestError):
        read_json(write(tmp_path, "x.json", '{"hello": 1}'))


# --- SWF ---------------------------------------------------------------------------

# Header keys as the Parallel Workloads Archive writes them.
SWF = """\
; Version: 2.2
; Computer: Example cluster
; Installation: Example site
; Acknowledge: Example
; Information: http://www.cs.huji.ac.il/labs/parallel/workload/
; Conversion: by hand for a test
; MaxJobs: 4
; MaxRecords: 6
; Preemption: Yes
; UnixStartTime: 1767571200
; TimeZoneString: Europe/Berlin
; StartTime: Mon Jan 05 00:00:00 CET 2026
; EndTime:   Tue Jan 06 00:00:00 CET 2026
; MaxNodes: 64
; MaxProcs: 512
; Note: partial executions of job 3 follow its summary line
;
    1      0     10   3600    16   -1   -1    16   7200   -1 1  3  1  1  1  1 -1 -1
    2     60     -1     -1    -1   -1   -1     8   3600   -1 5  4  1  1  1  1 -1 -1
    3    120      0   5000     4   -1   -1     4  86400   -1 1  3  1  2  1  1 -1 -1
    3    120      0   1000     4   -1   -1     4  86400   -1 2  3  1  2  1  1 -1 -1
    3    120   2000   2000     4   -1   -1     4  86400   -1 3  3  1  2  1  1 -1 -1
    4    200      5     60     1   -1   -1     1     60   -1 0  4  1  3  1  1 -1 -1
this line is broken
"""


def test_swf_header_and_partial_executions(tmp_path: Path) -> None:
    d = read_swf(write(tmp_path, "t.swf", SWF))
    st = d.stats[0]
    assert [u.line for u in st.unreadable] == [24]
    j = d.jobs
    assert j["submission_id"].n_unique() == 4
    # job 3: usage from its two partial runs (3000 s), not the 5000 s summary
    three = j.filter(pl.col("job_id") == "3")
    assert int((three["elapsed_s"] * three["cpus"]).sum()) == 3000 * 4
    # job 2 was cancelled before it started
    two = j.filter(pl.col("job_id") == "2").row(0, named=True)
    assert two["start"] is None and two["state"] == "CANCELLED" and two["cpus"] == 8
    one = j.filter(pl.col("job_id") == "1").row(0, named=True)
    assert one["user"] == "u3" and one["elapsed_s"] == 3600
    assert one["submit"].timestamp() == 1767571200
    assert any("Europe/Berlin" in n for n in st.notes)


def test_swf_header_parse() -> None:
    h = parse_header(["; UnixStartTime: 5", "; MaxProcs: 9", "; Note: a: b"])
    assert h["UnixStartTime"] == "5" and h["MaxProcs"] == "9"


# --- telemetry -----------------------------------------------------------------------


def _store(path: Path) -> None:
    sql = resources.files("tenantry.store").joinpath("migrations/0001_initial.sql").read_text()
    conn = sqlite3.connect(path)
    conn.executescript(sql)
    conn.execute(
        "INSERT INTO sessions VALUES"
        " ('ann/claude-code/s1', 1, 'ann', 'claude-code', 's1', 'h', '', 0, 0, 5)"
    )
    conn.execute(
        "INSERT INTO sessions VALUES ('ben/human/-', 2, 'ben', 'human', '', 'h', '', 0, 0, 1)"
    )
    for i in range(30):
        conn.execute(
            "INSERT INTO commands (id, principal, uid, argv_json, cwd, where_run, started_at)"
            " VALUES (?, 'ann/claude-code/s1', 1, '[\"pytest\"]', '/', 'local', ?)",
            (f"c{i}", 1767607200 + i * 10),
        )
    cols = (
        "id, backend, backend_id, state, principal, uid, name, spec_json, spec_hash,"
        " submitted_at, started_at, ended_at, resources_json, updated_at"
    )
    marks = ", ".join("?" * 14)
    conn.execute(
        f"INSERT INTO jobs ({cols}) VALUES ({marks})",
        (
            "t-1",
            "local",
            "77",
            "COMPLETED",
            "ann/claude-code/s1",
            1,
            "build",
            "{}",
            "h",
            1767607200,
            1767607201,
            1767610801,
            '{"cpus": 4}',
            0,
        ),
    )
    conn.execute(
        f"INSERT INTO jobs ({cols}) VALUES ({marks})",
        (
            "t-2",
            "slurm",
            "78",
            "PENDING",
            "ann/claude-code/s1",
            1,
            "x",
            "{}",
            "h",
            1767607200,
            None,
            None,
            "{}",
            0,
        ),
    )
    conn.commit()
    conn.close()


def test_telemetry_is_read_only_and_complete(tmp_path: Path) -> None:
    db = tmp_path / "tenantry.db"
    _store(db)
    before = db.read_bytes()
    assert sources.sniff(db) == "telemetry"
    d = read_telemetry(db)
    assert db.read_bytes() == before
    assert d.commands.height == 30 and d.sessions.height == 2
    # only the daemon's own (non-Slurm) jobs become job rows, tagged for the classifier
    assert d.jobs["job_id"].to_list() == ["t-1"]
    row = d.jobs.row(0, named=True)
    assert row["elapsed_s"] == 3600 and row["cpus"] == 4
    assert "agent=claude-code" in row["comment"]


def test_telemetry_missing_tables_is_an_ingest_error(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE x (a)")
    conn.commit()
    conn.close()
    with pytest.raises(IngestError, match="telemetry store"):
        read_telemetry(db)


def test_sniff_formats(tmp_path: Path) -> None:
    assert sources.sniff(write(tmp_path, "a", "JobID|User\n1|x\n")) == "sacct"
    assert sources.sniff(write(tmp_path, "b", "; Version: 2\n1 2 3\n")) == "swf"
    assert sources.sniff(write(tmp_path, "c", json.dumps({"jobs": []}))) == "json"
    with pytest.raises(IngestError, match="not a format"):
        sources.sniff(write(tmp_path, "d", "hello world\n"))


def test_real_dumps_agree_on_the_headline(fixtures: Path) -> None:
    """The same recorded jobs through three real formats give the same totals."""
    from tenantry.report import metrics

    totals = {}
    for name in ("sacct_xdmod.txt", "sacct_wide.txt", "sacct.json"):
        h = metrics.build(sources.load([fixtures / name]))["headline"]
        totals[name] = {k: h[k]["total"] for k in ("submissions", "core_hours", "gpu_hours")}
    base = totals["sacct_wide.txt"]
    for name, t in totals.items():
        assert t["submissions"] == base["submissions"] == 15, name
        # the job still running was dumped a second or two apart by each command
        assert t["core_hours"] == pytest.approx(base["core_hours"], abs=3 / 3600), name
        assert t["gpu_hours"] == pytest.approx(base["gpu_hours"]), name
    # two GPU jobs: 1 GPU x 2 s and 2 GPUs x 2 s
    assert base["gpu_hours"] == pytest.approx(6 / 3600, abs=1e-3)


def test_real_wide_dump_classifies_by_tag(fixtures: Path) -> None:
    from tenantry.report import metrics

    r = metrics.build(sources.load([fixtures / "sacct_wide.txt"]))
    [u] = r["top_users"]
    assert u["class"] == "agent" and "tag" in u["evidence"]
    assert r["sessions"]["by_agent"] == {"claude-code": 1, "codex": 1}
    assert r["trial_error"]["agent"]["loops"] == 1  # the three rpt-fail jobs


def test_telemetry_commands_by_principal_class(tmp_path: Path) -> None:
    from tenantry.report import metrics

    db = tmp_path / "tenantry.db"
    _store(db)
    conn = sqlite3.connect(db)
    conn.execute(
        "INSERT INTO commands (id, principal, uid, argv_json, cwd, where_run, started_at)"
        " VALUES ('h1', 'ann/human/-', 1, '[]', '/', 'local', 1767607200)"
    )
    conn.commit()
    conn.close()
    r = metrics.build(sources.load([db]))
    t = r["telemetry"]
    assert t["agent"] == {"commands": 30, "principals": 1, "active_hours": 1, "rate_per_hour": 30.0}
    assert t["human"]["commands"] == 1
    # the user ran an agent: a user-level agent, with all 31 commands
    assert r["command_rate"]["by_class"]["agent"]["commands"] == 31 + 1  # + the local job
    # Tenantry's command telemetry feeds the behavioural table, by principal
    b = r["behaviour"]
    assert b["agent"]["commands"] == 30 and b["human"]["commands"] == 1
    assert b["ratio"] == 30.0


def test_gzip_inputs_are_read_transparently(tmp_path: Path, fixtures: Path) -> None:
    import gzip

    from tenantry.report.ingest_sacct import read_sacct

    plain = fixtures / "sacct_wide.txt"
    gz = tmp_path / "sacct_wide.txt.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    swf = tmp_path / "t.swf.gz"
    swf.write_bytes(gzip.compress(SWF.encode()))
    assert sources.sniff(gz) == "sacct" and sources.sniff(swf) == "swf"
    seen: list[int] = []
    a = sources.load([gz], progress=seen.append)
    assert a.jobs.equals(read_sacct(plain).jobs.with_columns(source=pl.lit(gz.name)))
    assert sum(seen) == gz.stat().st_size  # progress counts bytes of the file on disk
    assert read_swf(swf).jobs["submission_id"].n_unique() == 4


def test_corrupt_gzip_is_an_ingest_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.gz"
    bad.write_bytes(b"\x1f\x8b" + b"not really gzip" * 10)
    with pytest.raises(IngestError):
        sources.load([bad])
