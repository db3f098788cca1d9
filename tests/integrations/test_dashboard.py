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
from tenantry.core.events import Bus, Event, EventType
from tenantry.core.models import AgentProduct, Principal
from tenantry.core.settings import load
from tenantry.gateway.dashboard.routes import COOKIE, TOKEN_FILE, ensure_token, http_app
from tenantry.gateway.metrics import Metrics, create
from tenantry.gateway.svg import bars, nice_max
from tenantry.service.runtime import Runtime
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
    # the shapes the policy, lease, budget, memory and index components emit
    await emit(
        Event(
            EventType.POLICY_DECISION,
            BOB.key,
            "submit_job",
            "deny",
            data={
                "rule": "no-gpu-at-night",
                "source": "facility",
                "message": "GPU jobs after 22:00 need approval",
                "checks": 3,
            },
        )
    )
    await emit(
        Event(
            EventType.BUDGET_WARNING,
            BOB.key,
            "submit_job",
            "warning",
            data={
                "scope": "user",
                "scope_key": "bob",
                "window": "day",
                "metric": "core_hours",
                "used": 90,
                "limit": 100,
                "fraction": 0.9,
            },
        )
    )
    await rt.journal.db.execute(  # budget.exceeded: a type the budgets component adds
        "INSERT INTO events (ts, type, principal, subject, outcome, data_json)"
        " VALUES (?,?,?,?,?,?)",
        (
            time.time(),
            "budget.exceeded",
            BOB.key,
            "submit_job",
            "denied",
            json.dumps({"metric": "gpu_hours", "used": 8, "limit": 8, "window": "day"}),
        ),
    )
    lease = {"backend_id": "77", "pool": "alice/cpu8", "slots": 8}
    await emit(Event(EventType.LEASE_REQUESTED, ALICE.key, "L1", "", data=lease))
    await emit(
        Event(EventType.LEASE_READY, ALICE.key, "L1", "", 41.0, {"host": "node17", "slots": 8})
    )
    await emit(Event(EventType.LEASE_REQUESTED, BOB.key, "L2", "", data={**lease, "slots": 2}))
    await emit(Event(EventType.LEASE_READY, BOB.key, "L2", "", 12.0, {"host": "node3", "slots": 2}))
    await emit(
        Event(
            EventType.LEASE_RELEASED,
            BOB.key,
            "L2",
            "released",
            data={"reason": "idle for 180 s", "served": 7, "idle_core_s": 3600.0},
        )
    )
    for returned in (["m1", "m2"], ["m3"], []):
        await emit(
            Event(
                EventType.MEMORY_RECALL,
                ALICE.key,
                "",
                str(len(returned)),
                0.002,
                {"returned": returned},
            )
        )
    for outcome in ("ok", "ok", "ok", "error"):
        await emit(
            Event(
                EventType.INDEX_QUERY,
                ALICE.key,
                "find",
                outcome,
                0.001,
                {"path": "/w", "results": 3},
            )
        )
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
        "/leases": ["L1", "node17", "idle core-hours", "1.00", "idle for 180 s"],
        "/policy": [
            "redirect.squeue",
            "no-gpu-at-night",
            "submit_job: GPU jobs after 22:00 need approval",
            "squeue -u alice",
            "gpu_hours 8 / 8",
            "core_hours 90 / 100 (90 %) of user bob per day",
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
    assert 'tenantry_memory_recalls_total{outcome="hit"} 2.0' in m
    assert 'tenantry_memory_recalls_total{outcome="miss"} 1.0' in m
    assert "_created" not in m
    await c.aclose()


async def test_each_daemon_has_its_own_registry(rt: Runtime) -> None:
    other = Metrics(rt)
    assert other.registry is not rt.component("metrics", Metrics).registry
    assert b'tenantry_status_queries_total{served_from="cache"} 30.0' not in other.render()


def test_svg_chart_escapes_and_scales() -> None:
    svg = bars(["<a>", "b"], [("x<y", [1.0, 3.0])], title="t & t")
    assert "<a>" not in svg.replace("<title>", "") and "&lt;a&gt;" in svg and "t &amp; t" in svg
    assert nice_max(0) == 1.0 and nice_max(7) == 10.0 and nice_max(230) == 250.0


async def test_report_page_uses_the_report_op(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    from tenantry.service.ops import REGISTRY, Op

    calls: list[dict[str, Any]] = []

    async def latest(ctx: Any, params: dict[str, Any]) -> dict[str, Any]:
        calls.append(params)
        share = {"agent": 55.8, "unknown": 1.2, "human": 43.0}
        return {
            "window": {"since": "2026-11-23", "until": "2026-11-30"},
            "headline": {
                "users": {
                    "share_pct": {"agent": 19.5, "unknown": 0, "human": 80.5},
                    "agent_bounds_pct": [19.5, 19.5],
                    "total": 41,
                },
                "submissions": {
                    "share_pct": share,
                    "agent_bounds_pct": [55.8, 57.0],
                    "total": 1234,
                },
            },
            "command_rate": {"ratio_pooled": 20.8, "ratio_of_medians": 11.5},
        }

    monkeypatch.setitem(REGISTRY, "report.latest", Op("report.latest", latest, "test"))
    c = await client(rt)
    r = await c.get("/report?hours=168")
    body = text(r.text)
    assert "55.8 %" in body and "19.5 %" in body and "1,234" in body and "20.8×" in body
    assert calls == [{"days": 7.0}]
    await c.aclose()


async def test_budgets_in_force_from_the_component(rt: Runtime) -> None:
    asked: list[str] = []

    class Budgets:
        async def status(self, p: Principal) -> list[dict[str, Any]]:
            asked.append(p.key)
            return [
                {
                    "scope": "user",
                    "scope_key": p.user,
                    "window": "day",
                    "metric": "core_hours",
                    "used": 45.5,
                    "limit": 100,
                    "fraction": 0.455,
                },
            ]

    c = await client(rt)
    assert "budgets service is not running" in text((await c.get("/policy")).text)
    rt.budgets = Budgets()
    body = text((await c.get("/policy")).text)
    assert "user alice" in body and "45.5 / 100" in body and "46 %" in body
    assert ALICE.key in asked and BOB.key in asked
    await c.aclose()


async def test_a_held_action_is_approved_from_the_dashboard(state_dir: str) -> None:
    """The policy page lists what waits for the human; approving needs login and the form key."""
    import os
    import pwd

    from tenantry.gateway.app import open_runtime
    from tenantry.safety.policy.component import PolicyService

    settings = load(env={}, overrides={"state_dir": state_dir, "socket": f"{state_dir}/sock"})
    async with open_runtime(settings, FakeBackend()) as full:
        me = pwd.getpwuid(os.getuid()).pw_name
        desk = full.component("policy", PolicyService).approvals
        label = "cp x .git/hooks/pre-commit"
        held = desk.hold(
            f"{me}/codex/s1", "", "write_file", "agent-control-files", "d", label, time.time()
        )
        c = await client(full)
        page = (await c.get("/policy")).text
        assert "Waiting for approval" in page and ".git/hooks/pre-commit" in page
        key = re.search(r'name="key" value="([0-9a-f]+)"', page)
        assert key is not None
        form = {"content-type": "application/x-www-form-urlencoded"}
        body = f"id={held.id}&scope=session&decision=approve"
        stale = await c.post("/approvals", content=body + "&key=0", headers=form)
        assert stale.status_code == 403 and desk.items[held.id].status == "pending"
        anon = await client(full, login=False)
        assert (await anon.post("/approvals", content=body, headers=form)).status_code == 401
        ok = await c.post("/approvals", content=f"{body}&key={key.group(1)}", headers=form)
        assert ok.status_code == 303
        assert (desk.items[held.id].status, desk.items[held.id].scope) == ("approved", "session")
        assert "nothing waiting for you" in (await c.get("/policy")).text
        await full.journal.flush()
        events = await full.journal.events(types=["policy.decision"])
        assert "approval.approved" in {ev["subject"] for ev in events}
        await c.aclose()
        await anon.aclose()
