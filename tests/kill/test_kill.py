"""The kill switch: in-process with the real job service, runner and a fake backend."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenantry.backends.fake import FakeBackend
from tenantry.commands.runner import LocalRunner
from tenantry.commands.service import CommandService
from tenantry.core.errors import Conflict, NotFound, PermissionDenied, SessionStopped
from tenantry.core.events import Bus
from tenantry.core.models import AgentProduct, CommandSpec, JobSpec, JobState, Principal
from tenantry.core.settings import Settings, load
from tenantry.gateway.app import open_runtime
from tenantry.jobs.service import JobService
from tenantry.safety.kill.component import KillSwitch, Stop, principal_from_key
from tenantry.service.ops import REGISTRY, OpContext
from tenantry.service.runtime import Runtime
from tenantry.store.journal import Journal

from ..gateway.conftest import remove_state, state_tempdir

AGENT = Principal(uid=1000, user="alice", agent=AgentProduct.CODEX, session="s1")
SIBLING = Principal(uid=1000, user="alice", agent=AgentProduct.CLAUDE_CODE, session="s2")
HUMAN = Principal(uid=1000, user="alice")
BOB = Principal(uid=1001, user="bob")
BOB_AGENT = Principal(uid=1001, user="bob", agent=AgentProduct.CODEX, session="s9")


def settings(state: str, **kw: Any) -> Settings:
    return load(env={}, overrides={"state_dir": state, **kw})


async def call(rt: Runtime, who: Principal, name: str, **params: Any) -> Any:
    return await REGISTRY[name].fn(OpContext(who, rt), params)


async def wait_until(cond: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)


def test_stop_matching_never_touches_humans() -> None:
    s = Stop(1, "session", "s1", "alice", "h", "", 0.0)
    assert s.matches(AGENT)
    assert not s.matches(SIBLING)
    assert not s.matches(HUMAN)
    assert Stop(1, "session", AGENT.key, "*", "h", "", 0.0).matches(AGENT)
    # a non-staff stop is limited to the caller's own user
    assert not Stop(1, "session", "s9", "alice", "h", "", 0.0).matches(BOB_AGENT)
    u = Stop(2, "user", "alice", "alice", "h", "", 0.0)
    assert u.matches(AGENT) and u.matches(SIBLING) and not u.matches(HUMAN)
    assert principal_from_key("alice/codex/-") == Principal(-1, "alice", AgentProduct.CODEX, "")
    assert principal_from_key("junk") is None


async def test_stop_persists_across_restart_and_resume(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "tenantry.sqlite3")
    await journal.start()
    rt = Runtime(settings(str(tmp_path)), journal=journal, bus=Bus(), backend=None)  # type: ignore[arg-type]
    ks = KillSwitch(rt)
    await ks.start()
    summary = await ks.stop("session", "s1", by=HUMAN, owner="alice", reason="runaway")
    assert summary["principals"] == [] and set(summary["skipped"]) == {
        "sandbox",
        "leases",
        "runner",
    }
    with pytest.raises(SessionStopped, match="runaway") as info:
        await ks.ensure_active(AGENT)
    assert "resume-session s1" in (info.value.hint or "")
    await ks.ensure_active(SIBLING)
    await ks.ensure_active(HUMAN)
    await ks.aclose()

    ks2 = KillSwitch(rt)
    await ks2.start()
    try:
        with pytest.raises(SessionStopped):
            await ks2.gate(AGENT, "commands.run", "run_command", {})
        assert [s["target"] for s in ks2.list_stopped()] == ["s1"]
        await ks2.resume("session", "s1", by=HUMAN, owner="alice")
        await ks2.ensure_active(AGENT)
        with pytest.raises(NotFound):
            await ks2.resume("session", "s1", by=HUMAN, owner="alice")
        await ks2.stop("user", "alice", by=HUMAN, owner="alice")
        await ks2.ensure_active(HUMAN)
        with pytest.raises(SessionStopped, match="all agents of user alice"):
            await ks2.ensure_active(SIBLING)
        with pytest.raises(Conflict, match="resume-user"):
            await ks2.resume("session", "s2", by=HUMAN, owner="alice")
    finally:
        await ks2.aclose()
        await journal.aclose()


@pytest.fixture
async def runtime() -> AsyncIterator[Runtime]:
    state = state_tempdir()
    try:
        async with open_runtime(
            settings(state, poll_fast_s=0.05, poll_slow_s=0.1), FakeBackend()
        ) as rt:
            yield rt
    finally:
        remove_state(state)


async def test_admin_ops_are_for_humans_and_staff(runtime: Runtime) -> None:
    with pytest.raises(PermissionDenied, match="for humans"):
        await call(runtime, AGENT, "admin.stop_session", session="s2")
    with pytest.raises(PermissionDenied, match="only your own"):
        await call(runtime, HUMAN, "admin.stop_user", user="bob")
    out = await call(runtime, HUMAN, "admin.stop_session", session="s9")
    assert out["principals"] == []
    await runtime.component("kill", KillSwitch).ensure_active(BOB_AGENT)  # bob's s9 untouched
    staff = runtime.settings.replace(admin_users="root,carol")
    runtime.settings = staff
    with pytest.raises(PermissionDenied, match="only staff"):
        await call(runtime, HUMAN, "admin.stop_user", user="bob")
    carol = Principal(uid=0, user="carol")
    await call(runtime, carol, "admin.stop_user", user="bob")
    with pytest.raises(SessionStopped):
        await runtime.component("kill", KillSwitch).ensure_active(BOB_AGENT)
    listed = await call(runtime, carol, "admin.list_stopped")
    assert {(s["kind"], s["target"]) for s in listed["stopped"]} == {
        ("session", "s9"),
        ("user", "bob"),
    }


async def test_stop_session_cancels_jobs_and_ends_commands(
    runtime: Runtime, tmp_path: Path
) -> None:
    jobs = runtime.component("jobs", JobService)
    backend = runtime.backend
    assert isinstance(backend, FakeBackend)
    spec = JobSpec(script=str(tmp_path / "j.sh"), script_text="sleep 100\n", cwd=str(tmp_path))
    agent_job, _, _ = await jobs.submit(AGENT, spec)
    human_job, _, _ = await jobs.submit(
        HUMAN, JobSpec(spec.script, "sleep 101\n", cwd=str(tmp_path))
    )
    backend.set_state(agent_job.backend_id, JobState.RUNNING)

    async def sink(stream: str, data: bytes) -> None:
        return None

    commands = runtime.component("commands", CommandService)
    agent_cmd = asyncio.create_task(
        commands.run(AGENT, CommandSpec(("sleep", "60"), cwd="/"), sink)
    )
    human_cmd = asyncio.create_task(
        commands.run(HUMAN, CommandSpec(("sleep", "1.5"), cwd="/"), sink)
    )
    runner = runtime.component("runner", LocalRunner)
    await wait_until(lambda: runner.running() == 2)

    out = await call(runtime, HUMAN, "admin.stop_session", session="s1", reason="test")
    assert out["principals"] == [AGENT.key]
    assert out["jobs_cancelled"] == [agent_job.id]
    assert out["commands_ended"] == 1
    assert "runner" not in out["skipped"]

    result = await asyncio.wait_for(agent_cmd, 10)
    assert result.state == "failed" and "SIGKILL" in result.reason
    assert backend.jobs[agent_job.backend_id].state is JobState.CANCELLED
    assert backend.jobs[human_job.backend_id].state is JobState.PENDING  # the human's job lives
    human_result = await asyncio.wait_for(human_cmd, 10)
    assert human_result.state == "completed"  # the human's command was not touched

    with pytest.raises(SessionStopped):
        await runtime.component("kill", KillSwitch).ensure_active(AGENT)
    await call(runtime, HUMAN, "admin.resume_session", session="s1")
    await runtime.component("kill", KillSwitch).ensure_active(AGENT)


async def test_a_command_started_after_the_stop_is_ended(runtime: Runtime) -> None:
    """A command the gates let through just before a stop, but started after the
    stop's sweep (nothing of it in the runner's table then), is ended at its start."""

    async def sink(stream: str, data: bytes) -> None:
        return None

    await call(runtime, HUMAN, "admin.stop_session", session="s1", reason="raced")
    commands = runtime.component("commands", CommandService)
    # the op past its gates: the service itself, as the gateway calls it
    result = await asyncio.wait_for(
        commands.run(AGENT, CommandSpec(("sleep", "60"), cwd="/", where="local"), sink), 20
    )
    assert result.state == "failed" and "SIGKILL" in result.reason
    # the sibling session and the human are not stopped: their commands run
    ok = await commands.run(SIBLING, CommandSpec(("true",), cwd="/", where="local"), sink)
    assert ok.state == "completed"
