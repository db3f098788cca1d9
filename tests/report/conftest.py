"""Fixtures of the report tests: recorded real outputs and small simulated traces."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "report"


@pytest.fixture(scope="session")
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def paper_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A paper-calibrated sacct dump (200 users, 14 days) with labels next to it."""
    from tenantry.report import simulate, simulate_write

    out = tmp_path_factory.mktemp("sim") / "paper.txt"
    trace = simulate.generate(users=200, days=14, seed=7, profile=simulate.PAPER)
    simulate_write.write(trace, out, "sacct")
    return out


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p
