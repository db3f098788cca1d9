"""report.latest over a real store file."""

from __future__ import annotations

import sqlite3
import time
from importlib import resources
from pathlib import Path

import pytest

from tenantry.core.errors import IngestError
from tenantry.core.events import Bus
from tenantry.core.models import Principal
from tenantry.core.settings import load
from tenantry.report import ops as report_ops
from tenantry.service.ops import REGISTRY, OpContext
from tenantry.service.runtime import Runtime


def _ctx(state: Path) -> OpContext:
    settings = load(overrides={"state_dir": str(state)})
    runtime = Runtime(settings, None, Bus(), None)  # type: ignore[arg-type]
    return OpContext(principal=Principal(uid=0, user="op"), runtime=runtime)


async def test_report_latest_reads_the_store(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path)
    db = ctx.runtime.settings.db_path
    conn = sqlite3.connect(db)
    sql = resources.files("tenantry.store").joinpath("migrations/0001_initial.sql").read_text()
    conn.executescript(sql)
    now = time.time()
    conn.execute(
        "INSERT INTO sessions VALUES ('ann/codex/s1', 1, 'ann', 'codex', 's1', 'h', '', 0, 0, 1)"
    )
    for i in range(12):
        conn.execute(
            "INSERT INTO commands (id, principal, uid, argv_json, cwd, where_run, started_at)"
            " VALUES (?, 'ann/codex/s1', 1, '[]', '/', 'local', ?)",
            (f"c{i}", now - 3600 + i),
        )
    conn.commit()
    conn.close()
    assert "report.latest" in REGISTRY
    out = await report_ops.latest(ctx, {"days": 1})
    assert out["headline"]["users"]["share_pct"]["agent"] == 100.0
    assert out["command_rate"]["by_class"]["agent"]["commands"] == 12
    assert set(out) == set(report_ops.KEYS)


async def test_report_latest_without_store(tmp_path: Path) -> None:
    with pytest.raises(IngestError):
        await report_ops.latest(_ctx(tmp_path / "none"), {})


async def test_dashboard_renders_the_real_op_result(tmp_path: Path) -> None:
    """The dashboard's report page understands what report.latest returns."""
    from tenantry.gateway.dashboard.routes import render_report

    await test_report_latest_reads_the_store(tmp_path)
    report_ops._cache.clear()
    out = await report_ops.latest(_ctx(tmp_path), {"days": 1.0})
    html = render_report(out)
    assert "100.0 %" in html and "Users" in html and "agent bounds" in html


def test_empty_store_gives_an_empty_report_not_an_error(tmp_path: Path) -> None:
    """A fresh daemon's store holds no records: the dashboard gets zeros, not exit 65."""
    db = tmp_path / "tenantry.db"
    conn = sqlite3.connect(db)
    migrations = resources.files("tenantry.store").joinpath("migrations")
    for f in sorted(migrations.iterdir(), key=lambda x: x.name):
        if f.name.endswith(".sql"):
            conn.executescript(f.read_text())
    conn.close()
    out = report_ops.compute([str(db)], None, None)
    assert out["headline"]["users"]["total"] == 0
    assert out["headline"]["submissions"]["total"] == 0
