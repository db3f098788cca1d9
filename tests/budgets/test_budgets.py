"""Budgets and rate limits on real SQLite, with a fixed clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import tenantry.safety.budgets as budgets_pkg
from tenantry.core.errors import BudgetExceeded, UsageError
from tenantry.core.events import Bus, Event, EventType
from tenantry.core.models import AgentProduct, Principal
from tenantry.core.settings import load
from tenantry.safety.budgets.config import load as load_config
from tenantry.safety.budgets.config import parse
from tenantry.safety.budgets.service import BudgetService, amounts_for, array_tasks
from tenantry.safety.budgets.windows import bounds
from tenantry.service.runtime import Runtime

AGENT = Principal(uid=1, user="alice", agent=AgentProduct.CODEX, session="s1")
SIBLING = Principal(uid=1, user="alice", agent=AgentProduct.CLAUDE_CODE, session="s2")
HUMAN = Principal(uid=1, user="alice")


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


NIGHT = ts("2026-11-30T22:00:00")
NOON = ts("2026-11-30T12:00:00")


def make(state: Path, data: dict[str, Any], now: float = NIGHT) -> tuple[BudgetService, Bus]:
    bus = Bus()
    settings = load(env={}, overrides={"state_dir": str(state)})
    rt = Runtime(settings, journal=None, bus=bus, backend=None)  # type: ignore[arg-type]
    svc = BudgetService(rt, parse({"timezone": "UTC", "replace_defaults": True, **data}))
    svc.clock = lambda: now
    return svc, bus


async def test_rate_limit_warns_then_stops_with_reset_time(tmp_path: Path) -> None:
    svc, bus = make(tmp_path, {"warn_fraction": 0.6, "session": {"minute": {"commands": 5}}})
    seen: list[Event] = []

    async def grab(e: Event) -> None:
        seen.append(e)

    bus.subscribe(grab)
    await svc.start()
    try:
        out = [await svc.charge(AGENT, "run_command", {"commands": 1}) for _ in range(5)]
        assert [bool(w) for w in out] == [False, False, True, True, True]
        assert "60 % of this minute's command budget used (3 of 5" in out[2][0]
        assert "resets 22:01:00" in out[2][0]
        with pytest.raises(BudgetExceeded) as info:
            await svc.charge(AGENT, "run_command", {"commands": 1})
        err = info.value
        assert "exhausted" in err.message and "resets 22:01:00" in err.message
        assert err.details["reset_at"] == NIGHT + 60
        assert err.hint
        # a sibling session has its own session budget
        assert await svc.charge(SIBLING, "run_command", {"commands": 1}) == []
        # after the window the count starts over
        svc.clock = lambda: NIGHT + 61
        assert await svc.charge(AGENT, "run_command", {"commands": 1}) == []
    finally:
        await svc.aclose()
    types = [e.type for e in seen]
    assert types.count(EventType.BUDGET_WARNING) == 1  # once per window, not per call
    assert types.count(EventType.BUDGET_EXCEEDED) == 1


async def test_counters_survive_a_restart(tmp_path: Path) -> None:
    cfg = {"user": {"day": {"jobs": 3}}}
    svc, _ = make(tmp_path, cfg)
    await svc.start()
    for _ in range(3):
        await svc.charge(AGENT, "submit_job", {"jobs": 1})
    await svc.aclose()
    svc2, _ = make(tmp_path, cfg, now=NIGHT + 3600)
    await svc2.start()
    try:
        with pytest.raises(BudgetExceeded, match="today's job budget for user alice"):
            await svc2.charge(SIBLING, "submit_job", {"jobs": 1})
    finally:
        await svc2.aclose()


async def test_gpu_hours_from_job_events_and_night_window(tmp_path: Path) -> None:
    svc, bus = make(tmp_path, {"warn_fraction": 0.7, "user": {"night": {"gpu_hours": 4}}})
    await svc.start()
    try:
        res = {"cpus": 4, "gpus": 2, "time_s": 3600}
        assert await svc.charge(AGENT, "submit_job", {"gpu_hours": 2.0}) == []
        await bus.publish(Event(EventType.JOB_SUBMITTED, AGENT.key, "t-1", data={"resources": res}))
        # 2 GPU-hours in flight + 1 asked = 75 % of tonight's 4
        warnings = await svc.charge(SIBLING, "submit_job", {"gpu_hours": 1.0})
        assert len(warnings) == 1 and "tonight's GPU-hour budget" in warnings[0]
        assert "batch your sweep" in warnings[0]
        with pytest.raises(BudgetExceeded) as info:
            await svc.charge(AGENT, "submit_job", {"gpu_hours": 3.0})
        assert info.value.details["reset_at"] == ts("2026-12-01T07:00:00")
        # the job really ran half an hour: 1 GPU-hour is recorded, the estimate dropped
        await bus.publish(
            Event(EventType.JOB_STATE, AGENT.key, "t-1", "COMPLETED",
                  data={"resources": res, "elapsed_s": 1800.0})
        )  # fmt: skip
        status = {(b["scope"], b["window"], b["metric"]): b for b in await svc.status(AGENT)}
        assert status[("user", "night", "gpu_hours")]["used"] == pytest.approx(1.0)
        await svc.charge(AGENT, "submit_job", {"gpu_hours": 3.0})
    finally:
        await svc.aclose()


async def test_night_budget_does_not_apply_by_day(tmp_path: Path) -> None:
    svc, _ = make(tmp_path, {"user": {"night": {"jobs": 1}}}, now=NOON)
    await svc.start()
    try:
        for _ in range(3):
            assert await svc.charge(AGENT, "submit_job", {"jobs": 1}) == []
        assert await svc.status(AGENT) == []
    finally:
        await svc.aclose()


async def test_command_cpu_time_and_leases(tmp_path: Path) -> None:
    svc, bus = make(
        tmp_path,
        {"session": {"day": {"core_hours": 1}, "concurrent": {"leases": 1}}},
    )
    await svc.start()
    try:
        await bus.publish(
            Event(EventType.COMMAND_FINISHED, AGENT.key, "c1", "completed", 10.0,
                  {"cpu_s": 3600.0})
        )  # fmt: skip
        with pytest.raises(BudgetExceeded, match="today's core-hour budget"):
            await svc.charge(AGENT, "submit_job", {"core_hours": 0.5})
        await bus.publish(Event(EventType.LEASE_READY, AGENT.key, "L1"))
        with pytest.raises(BudgetExceeded, match="when one of them is released"):
            await svc.charge(AGENT, "acquire_lease", {"leases": 1})
        await bus.publish(Event(EventType.LEASE_RELEASED, AGENT.key, "L1"))
        again = await svc.charge(AGENT, "acquire_lease", {"leases": 1})
        assert len(again) == 1 and again[0].startswith("100 % of concurrent lease budget")
    finally:
        await svc.aclose()


async def test_humans_are_not_budgeted_unless_configured(tmp_path: Path) -> None:
    svc, _ = make(tmp_path, {"session": {"minute": {"commands": 1}}})
    await svc.start()
    try:
        for _ in range(3):
            assert await svc.charge(HUMAN, "run_command", {"commands": 1}) == []
    finally:
        await svc.aclose()
    svc2, _ = make(tmp_path / "b", {"agents_only": False, "user": {"minute": {"commands": 1}}})
    await svc2.start()
    try:
        await svc2.charge(HUMAN, "run_command", {"commands": 1})
        with pytest.raises(BudgetExceeded):
            await svc2.charge(HUMAN, "run_command", {"commands": 1})
    finally:
        await svc2.aclose()


async def test_gate_maps_ops_to_amounts(tmp_path: Path) -> None:
    svc, _ = make(tmp_path, {"session": {"minute": {"queries": 1, "jobs": 10}}})
    await svc.start()
    try:
        assert await svc.gate(AGENT, "facility.info", None, {}) == []
        assert len(await svc.gate(AGENT, "jobs.status", "query_jobs", {})) == 1
        with pytest.raises(BudgetExceeded, match="scheduler-query"):
            await svc.gate(AGENT, "jobs.list", "query_jobs", {})
        with pytest.raises(BudgetExceeded, match="job budget"):
            await svc.gate(AGENT, "jobs.submit", "submit_job", {"array": "0-10"})
        with pytest.raises(UsageError):
            await svc.charge(AGENT, "x", {"bananas": 1})
    finally:
        await svc.aclose()


def test_amounts_and_arrays() -> None:
    assert array_tasks("") == 1
    assert array_tasks("0-9") == 10
    assert array_tasks("1,3,5-7") == 5
    assert array_tasks("0-99:10%4") == 10
    assert array_tasks("junk") == 1
    a = amounts_for(
        "submit_job", {"resources": {"cpus": 4, "gpus": 1, "time_s": 7200}, "array": "1-3"}
    )
    assert a == {"jobs": 3.0, "core_hours": 24.0, "gpu_hours": 6.0}
    assert amounts_for("submit_job", {})["core_hours"] == 1.0  # default 1 h, 1 cpu
    assert amounts_for("run_command", {}) == {"commands": 1.0}
    assert amounts_for("cancel_job", {}) == {}
    with pytest.raises(UsageError):
        amounts_for("submit_job", {"resources": {"cpus": "many"}})


def test_windows() -> None:
    cfg = parse({"timezone": "UTC", "night": "19:00-07:00"})
    assert bounds("night", ts("2026-11-30T20:00:00"), cfg) == (
        ts("2026-11-30T19:00:00"), ts("2026-12-01T07:00:00"))  # fmt: skip
    assert bounds("night", ts("2026-12-01T03:00:00"), cfg) == (
        ts("2026-11-30T19:00:00"), ts("2026-12-01T07:00:00"))  # fmt: skip
    assert bounds("night", ts("2026-12-01T12:00:00"), cfg) is None
    assert bounds("day", ts("2026-12-01T12:00:00"), cfg) == (
        ts("2026-12-01T00:00:00"), ts("2026-12-02T00:00:00"))  # fmt: skip
    early = parse({"timezone": "UTC", "night": "00:00-06:00"})
    assert bounds("night", ts("2026-12-01T05:59:00"), early) is not None
    assert bounds("night", ts("2026-12-01T06:00:00"), early) is None
    zurich = parse({"timezone": "Europe/Zurich"})
    start, _ = bounds("day", ts("2026-12-01T12:00:00"), zurich) or (0, 0)
    assert start == ts("2026-11-30T23:00:00")


def test_config_errors_and_files(tmp_path: Path) -> None:
    for bad in (
        {"session": {"fortnight": {"jobs": 1}}},
        {"session": {"day": {"bananas": 1}}},
        {"session": {"day": {"leases": 1}}},
        {"night": "late"},
        {"night": "25:00-07:00"},
        {"warn_fraction": 2},
        {"colour": "red"},
    ):
        with pytest.raises(UsageError):
            parse(bad)
    j = tmp_path / "b.json"
    j.write_text(json.dumps({"user": {"night": {"gpu_hours": 3}}}))
    cfg = load_config(str(j))
    assert any(lim.hard == 3 and lim.window == "night" for lim in cfg.limits)
    t = tmp_path / "b.toml"
    t.write_text('night = "20:00-06:00"\n[session.minute]\ncommands = 7\n')
    cfg = load_config(str(t))
    assert cfg.night_start == 20 * 60
    assert any(lim.hard == 7 and lim.metric == "commands" for lim in cfg.limits)
    assert load_config("").limits  # defaults
    with pytest.raises(UsageError):
        load_config(str(tmp_path / "missing.toml"))


def test_public_api() -> None:
    for name in budgets_pkg.__all__:
        assert hasattr(budgets_pkg, name)


async def test_default_budgets_never_throttle_cache_reads(tmp_path: Path) -> None:
    """Status queries cost the facility nothing: the 61st in a minute passes (was refused)."""
    settings = load(env={}, overrides={"state_dir": str(tmp_path)})
    rt = Runtime(settings, journal=None, bus=Bus(), backend=None)  # type: ignore[arg-type]
    svc = BudgetService(rt, parse({"timezone": "UTC"}))  # the shipped defaults
    svc.clock = lambda: NIGHT
    await svc.start()
    try:
        for _ in range(200):
            assert await svc.gate(AGENT, "jobs.status", "query_jobs", {}) == []
        # submissions still count
        assert await svc.gate(AGENT, "jobs.submit", "submit_job", {}) == []
        assert any(u["metric"] == "jobs" and u["used"] == 1 for u in await svc.status(AGENT))
    finally:
        await svc.aclose()
