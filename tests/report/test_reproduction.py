"""The paper's numbers: simulate calibrated to the paper, report, compare."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenantry.report import metrics, simulate, simulate_write, sources

PAPER = {"users": 19.5, "submissions": 55.8, "core_hours": 29.1, "gpu_hours": 42.7}
RATIO = 20.8


def check(report: dict[str, object]) -> None:
    headline = report["headline"]
    assert isinstance(headline, dict)
    for key, want in PAPER.items():
        got = headline[key]["share_pct"]["agent"]
        assert abs(got - want) <= 1.0, (key, got, want)
        assert headline[key]["share_pct"]["unknown"] <= 1.0
    ratio = report["command_rate"]["ratio_pooled"]  # type: ignore[index]
    assert abs(ratio - RATIO) / RATIO <= 0.05, ratio


def test_paper_reproduced_from_a_sacct_dump(paper_trace: Path) -> None:
    check(metrics.build(sources.load([paper_trace])))


@pytest.mark.parametrize("seed", [11, 12])
def test_paper_reproduced_for_other_seeds_via_json(tmp_path: Path, seed: int) -> None:
    trace = simulate.generate(users=150, days=14, seed=seed, profile=simulate.PAPER)
    out = tmp_path / "t.json"
    simulate_write.write(trace, out, "json")
    check(metrics.build(sources.load([out])))


def test_paper_reproduced_through_the_cli(tmp_path: Path) -> None:
    """The commands an operator would type, as real subprocesses."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    trace = tmp_path / "trace.txt"
    sim = subprocess.run(
        [
            sys.executable,
            "-m",
            "tenantry",
            "simulate",
            "--users",
            "200",
            "--days",
            "14",
            "--seed",
            "21",
            "--calibrate",
            "paper",
            "--out",
            str(trace),
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    note = json.loads(sim.stdout)
    assert note["agent_users"] == 39 and Path(note["written"][1]).exists()
    rep = subprocess.run(
        [sys.executable, "-m", "tenantry", "report", str(trace), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    check(json.loads(rep.stdout))
