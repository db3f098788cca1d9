"""Dashboard pages and /metrics over a store filled here (in-process ASGI)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tenantry.backends.fake import FakeBackend
from tenantry.events import Bus, Event, EventType
from tenantry.gateway.dashboard import COOKIE, TOKEN_FILE, ensure_token, http_app
from tenantry.gateway.runtime import Runtime
from tenantry.gateway.svg import bars, nice_max
from tenantry.integrations.metrics import Metrics, create
from tenantry.models import AgentProduct, Principal
from tenantry.settings import load
from tenantry.store.journal import Journal

ALICE = Principal(1000, "alice", AgentProduct.CLAUDE_CODE, "sess-aaaa1111", "login1", "chem")
BOB = Principal(1001, "bob", AgentProduct.CODEX, "sess-bbbb2222", "login2", "phys")
CAROL = Principal(1002, "carol", AgentProduct.HUMAN, "", "login1", "chem")


@pytest.fixture
async def rt(state_dir: str) -> AsyncIterator[Runtime]:
    settings = load(env={}, overrides={"state_dir": state_dir, "socket": f"{state_dir}/sock"})
    journal = Journal(settings.db_path)
    await journal.start()
    bus = Bus()
    bus.subscribe(journal.add_event)
    runtime = Runtime(settings, journal, bus, FakeBackend())
    metrics = create(runtime)
    await metrics.start()
    runtime.components["metrics"] = metrics
    await fill(runtime)
    yield runtime
    await metrics.aclose()
    await journal.aclose()


async def fill(rt: Runtime) -> None:
    now = time.time()
    for p in (ALICE, BOB, CAROL):
        await rt.journal.touch_session(p, now - 60)
    j = rt.journal

    def rows(conn: Any) -> None:
        for i in range(12):
            t0 = now - 3600 * (i % 6) - 100
            conn.execute(
                "INSERT INTO commands (id, principal, uid, argv_json, cwd, where_run, started_at,"
                " ended_at, exit_code, state, cpu_s) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (
                    f"c{i}",
                    ALICE.key,
                    1000,
                    json.dumps(["pytest", "-x", f"t{i}"]),
                    "/w",
                    "local",
                    t0,
                    t0 + 2,
                    1 if i % 4 == 0 else 0,
                    "failed" if i % 4 == 0 else "completed",
                    3.0,
                ),
            )
        for i, state in enumerate(["COMPLETED", "COMPLETED", "FAILED", "RUNNING", "PENDING"]):
            t0 = now - 1800 * i - 50
            conn.execute(
                "INSERT INTO jobs (id, backend, backend_id, phase, state, principal, uid, name,"
                " spec_json, spec_hash, submitted_at, started_at, ended_at, resources_json,"
                " updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    f"t{i + 1}",
                    "fake",
                    str(100 + i),
                    "handed",
                    state,
                    BOB.key,
                    1001,
                    f"sim{i}",
                    "{}",
                    f"h{i}",
                    t0,
                    t0 + 10 if state != "PENDING" else None,
                    t0 + 610 if state in {"COMPLETED", "FAILED"} else None,
                    json.dumps({"cpus": 4}),
                    t0,
                ),
            )

    await j.db.write(rows)
    emit = rt.emit
    for _ in range(30):
        await emit(
            Event(EventType.STATUS_QUERY, BOB.key, "t1", "ok", None, {"served_from": "cache"})
        )
    for _ in range(3):
        await emit(Event(EventType.BACKEND_POLL, "", "", "ok", 0.04, {"jobs": 2}))
    await emit(
        Event(
            EventType.HOOK_DECISION,
            ALICE.key,
            ALICE.session,
            "deny",
            data={"rule": "redirect.squeue", "command": "squeue -u alice"},
        )
    )
    await emit(
        Event(
            EventType.POLICY_DECISION,
            BOB.key,
            "",
            "deny",
            data={"rule": "no-gpu-at-night", "action": "submit_job"},
        )
    )
    await emit(Event(EventType.LEASE_REQUESTED, ALICE.key, "L1", "", data={"cpus": 8}))
    await emit(Event(EventType.LEASE_READY, ALICE.key, "L1", "ok", data={"cpus": 8}))
    await emit(Event(EventType.LEASE_REQUESTED, BOB.key, "L2", "", data={"cpus": 2}))
    await emit(Event(EventType.LEASE_READY, BOB.key, "L2", "ok", data={"cpus": 2}))
    await emit(
        Event(
            EventType.LEASE_RELEASED,
            BOB.key,
            "L2",
            "idle",
            900.0,
            {"cpus": 2, "idle_s": 1800, "commands": 7},
        )
    )
    for outcome in ("hit", "hit", "miss"):
        await emit(Event(EventType.MEMORY_RECALL, ALICE.key, "", outcome, data={}))
    for served in ("index", "index", "index", "fs"):
        await emit(Event(EventType.INDEX_QUERY, ALICE.key, "", "ok", data={"served_from": served}))
    await emit(
        Event(
            EventType.SESSION_SEEN, ALICE.key, ALICE.session, "start", data={"agent": "claude-code"}
        )
    )


async def client(rt: Runtime, login: bool = True) -> httpx.AsyncClient:
    c = httpx.AsyncClient(transport=httpx.ASGITransport(app=http_app(rt)), base_url="http://t")
    if login:
        token = ensure_token(rt.settings.state_dir)
        r = await c.post(
            "/login",
            content=f"token={token}&next=/sessions",
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert r.status_code == 303 and r.headers["location"] == "/sessions"
    return c


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


async def test_login_is_required_and_token_file_is_private(rt: Runtime) -> None:
    c = await client(rt, login=False)
    r = await c.get("/activity")
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert (await c.get("/metrics")).status_code == 401
    path = Path(rt.settings.state_dir) / TOKEN_FILE
    assert path.stat().st_mode & 0o777 == 0o600
    bad = await c.post(
        "/login",
        content="token=nope",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert bad.status_code == 401 and "not right" in bad.text
    assert COOKIE not in bad.cookies
    # an open redirect is not possible through next=
    token = path.read_text().strip()
    r = await c.post(
        "/login",
        content=f"token={token}&next=//evil.example/",
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert r.headers["location"] == "/"
    await c.aclose()


async def test_pages_show_the_store(rt: Runtime) -> None:
    c = await client(rt)
    pages = {
        "/": ["live agent sessions", "claude-code 1", "codex 1", "status answered from cache"],
        "/sessions": ["Live sessions by agent product", "alice", "bob", "login2"],
        "/activity": ["pytest -x t0", "sim2", "FAILED"],
        "/scheduler": ["30", "calls passed to the scheduler", "10.0×"],
        "/leases": ["L1", "idle core-hours", "1.00"],
        "/policy": [
            "redirect.squeue",
            "no-gpu-at-night",
            "squeue -u alice",
            "Core-hours by principal",
        ],
        "/memory": ["memory hit rate", "67 %", "index hit rate", "75 %"],
        "/report": ["No report yet"],
    }
    for path, expected in pages.items():
        r = await c.get(path)
        assert r.status_code == 200, path
        assert "script" not in r.text.lower().replace("description", "")  # no JavaScript
        assert "default-src 'none'" in r.headers["content-security-policy"]
        body = text(r.text)
        for item in expected:
            assert item in body, f"{path}: {item!r} missing"
    await c.aclose()


async def test_report_page_embeds_the_latest_report(rt: Runtime) -> None:
    reports = Path(rt.settings.state_dir) / "reports"
    reports.mkdir()
    (reports / "old.md").write_text("# old")
    (reports / "facility-2026-11.html").write_text("<h1>Agents caused 55.8 % of submissions</h1>")
    c = await client(rt)
    r = await c.get("/report")
    assert "facility-2026-11.html" in r.text and 'sandbox src="/report/raw"' in r.text
    raw = await c.get("/report/raw")
    assert "55.8 %" in raw.text and raw.headers["content-security-policy"].startswith("sandbox")
    await c.aclose()


async def test_metrics_endpoint(rt: Runtime) -> None:
    c = await client(rt, login=False)
    token = ensure_token(rt.settings.state_dir)
    r = await c.get("/metrics", headers={"authorization": f"Bearer {token}"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    m = r.text
    assert 'tenantry_status_queries_total{served_from="cache"} 30.0' in m
    assert 'tenantry_backend_calls_total{outcome="ok"} 3.0' in m
    assert 'tenantry_policy_decisions_total{decision="deny",source="hook"} 1.0' in m
    assert 'tenantry_leases{state="ready"} 1.0' in m
    assert 'tenantry_queue_depth{state="PENDING"} 1.0' in m
    assert 'tenantry_queue_depth{state="RUNNING"} 1.0' in m
    assert "tenantry_backend_poll_duration_seconds_bucket" in m
    assert "_created" not in m
    await c.aclose()


async def test_each_daemon_has_its_own_registry(rt: Runtime) -> None:
    other = Metrics(rt)
    assert other.registry is not rt.components["metrics"].registry
    assert b'tenantry_status_queries_total{served_from="cache"} 30.0' not in other.render()


def test_svg_chart_escapes_and_scales() -> None:
    svg = bars(["<a>", "b"], [("x<y", [1.0, 3.0])], title="t & t")
    assert "<a>" not in svg.replace("<title>", "") and "&lt;a&gt;" in svg and "t &amp; t" in svg
    assert nice_max(0) == 1.0 and nice_max(7) == 10.0 and nice_max(230) == 250.0
