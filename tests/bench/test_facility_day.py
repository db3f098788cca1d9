"""Smoke test of the headline benchmark: the short facility day (N=5) on the real Slurm.

Runs ``bench/facility_day.py --short`` end to end (real Unix users, a real
FUSE mount, real Slurm jobs, a real facility service on PostgreSQL with the
agent users' daemons as its executors, hooks, shims, index and leases) and
checks that both arms ran the whole day and that the results are well formed.
No timed assertions: the numbers go to bench/facility_day.md.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import day_replay

from ..conftest import need_fuse

BENCH = Path(__file__).resolve().parents[2] / "bench"
pytestmark = [pytest.mark.slurm, pytest.mark.slow]


@pytest.fixture
def work() -> Iterator[Path]:
    # under /var/tmp, not pytest's 0700 tmp: the actors are other Unix users
    path = Path(tempfile.mkdtemp(prefix="ttday-test-", dir="/var/tmp"))
    os.chmod(path, 0o755)
    try:
        yield path
    finally:
        subprocess.run(["fusermount3", "-u", "-q", str(path / "mnt")], check=False)
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(1800)
def test_short_facility_day_runs_both_arms(slurm: None, work: Path) -> None:
    # root for a Unix user per actor; the default Tenantry arm is facility mode: one
    # service on PostgreSQL
    also = (
        "needs useradd and git" if not (shutil.which("useradd") and shutil.which("git"))
        else "needs PostgreSQL (scripts/dev-postgres)" if not shutil.which("pg_lsclusters")
        else ""
    )  # fmt: skip
    need_fuse(also)
    out = work / "out"
    run = subprocess.run(
        [sys.executable, str(BENCH / "facility_day.py"), "--short", "--work", str(work)],
        capture_output=True,
        text=True,
        timeout=1700,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    doc: dict[str, Any] = json.loads((out / "results.json").read_text())
    day = day_replay.generate(day_replay.DayConfig.short())
    scheduled = sum(len(a.actions) for a in day.actors)
    runs = {r["arm"]: r for r in doc["runs"]}
    assert set(runs) == {"bare", "tenantry"}
    for arm, r in runs.items():
        assert len(r["executed"]) == scheduled, f"{arm}: every scheduled command ran"
        assert r["end"] > r["start"]
        assert r["meta_ops"] > 0 and r["ops_per_command"]["grep"] >= 0
    bare, ten = runs["bare"], runs["tenantry"]
    tests = sum(1 for e in bare["executed"] if e["cls"] == "test")
    agent_jobs = sum(n for u, n in bare["jobs"].items() if "-a" in u)
    assert agent_jobs >= tests > 0, "bare: one Slurm job per test run"
    assert sum(ten["jobs"].values()) < sum(bare["jobs"].values())
    assert any(e["via_tenantry"] for e in ten["executed"]), "tests ran on leases"
    for cls in ("find", "grep"):  # answered from the index: at most the path's own lookups,
        # which the kernel's FUSE entry cache sometimes absorbs (0) and sometimes not
        ops, walked = ten["ops_per_command"][cls], bare["ops_per_command"][cls]
        assert ops <= 4 and ops * 10 <= walked, (cls, ops, walked)
    assert bare["ops_per_command"]["find"] > 0 and bare["ops_per_command"]["grep"] > 0
    # git status asks the index's change feed: a few dozen ops against every file's
    ops, walked = ten["ops_per_command"]["git"], bare["ops_per_command"]["git"]
    assert ops * 10 <= walked, ("git", ops, walked)
    assert ten["meta_setup_ops"] > 0, "the index crawled the workspace once"
    assert all(e["hook_s"] > 0 for e in ten["executed"] if "-a" in e["user"] and e["cls"] != "edit")
    denied = [e for e in ten["executed"] if e["denied"]]
    assert all(e["cls"] == "danger" for e in denied), "only destructive commands are denied"
    failed = [e for e in bare["executed"] + ten["executed"] if e["rc"] not in (0, -1, 1)]
    assert not failed, failed[:5]
    assert doc["meta"]["mode"] == "facility"
    assert "tt-day-svc" in ten["rpcs"], "the facility service's RPCs count in the arm"
    summary = doc["summary"]
    assert set(summary["arms"]) == {"bare", "tenantry"}
    for k in ("rpcs_agents", "jobs_agents", "meta_ops", "cpu_s", "wall_s"):
        assert k in summary["ratios"] or k in summary["arms"]["bare"]
    (cmp,) = summary["report_vs_truth"]
    assert cmp["error"] is None
    for key in ("users", "submissions", "core_hours"):
        got, want = cmp["report"][key], cmp["truth"]["shares"][key]
        assert got is not None and abs(got - want) <= 0.01, (key, got, want)
    md = (out / "summary.md").read_text()
    assert "| controller RPCs (agent users) |" in md and "tenantry report vs ground truth" in md
