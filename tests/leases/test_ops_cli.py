"""Lease ops inside a real daemon runtime, and the CLI surface."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from tenantry.cli.main import build_parser
from tenantry.commands.service import CommandService
from tenantry.core.errors import NotFound, SessionStopped
from tenantry.core.models import CommandSpec, Principal
from tenantry.core.settings import load
from tenantry.gateway import app
from tenantry.leases.manager import LeaseManager
from tenantry.service.ops import REGISTRY, OpContext
from tenantry.service.runtime import Runtime

from .conftest import Collect, Until


@pytest.fixture
async def runtime(state_dir: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Runtime]:
    monkeypatch.setattr(app, "COMPONENTS", (("leases", "tenantry.leases.component:create"),))
    monkeypatch.setattr(app, "OP_MODULES", (*app.OP_MODULES, "tenantry.leases.ops"))
    settings = load(env={}, overrides={"state_dir": state_dir, "local_slots": 8})
    async with app.open_runtime(settings) as rt:
        yield rt
        await rt.component("leases", LeaseManager).release_all("test over")


async def test_commands_run_goes_to_a_lease_and_ops_list_it(
    runtime: Runtime, alice: Principal, collect: type[Collect], wait: Until
) -> None:
    commands = runtime.component("commands", CommandService)
    spec = CommandSpec(argv=(sys.executable, "-c", "print('via lease')"), where="lease")
    result = await commands.run(alice, spec, collect())
    assert (result.state, result.where, result.stdout_tail) == ("completed", "lease", "via lease\n")
    ctx = OpContext(alice, runtime)
    listed = await REGISTRY["leases.list"].fn(ctx, {})
    (lease,) = listed["leases"]
    assert lease["served"] == 1 and lease["user"] == "alice"
    out = await REGISTRY["leases.release"].fn(ctx, {"id": lease["id"]})
    assert out["lease"]["state"] in {"draining", "released"}
    mgr = runtime.component("leases", LeaseManager)
    await wait(lambda: not mgr.leases(), what="release")
    with pytest.raises(NotFound):
        await REGISTRY["leases.release"].fn(ctx, {"id": "l-nope"})
    with pytest.raises(NotFound):
        await REGISTRY["leases.result"].fn(ctx, {"id": "c-nope"})


def test_auto_routing_asks_the_lease_manager(runtime: Runtime) -> None:
    mgr = runtime.component("leases", LeaseManager)
    assert mgr.route(CommandSpec(argv=("pytest",))) == "lease"
    assert mgr.route(CommandSpec(argv=("pytest",), where="local")) == "local"


def test_cli_parses_leases_and_pilot_commands() -> None:
    parser = build_parser()
    args = parser.parse_args(["leases", "--json"])
    assert args.json and args.handler.__name__ == "_list"
    args = parser.parse_args(["leases", "release", "l-1"])
    assert args.id == "l-1" and args.handler.__name__ == "_release"
    args = parser.parse_args(["pilot", "--connect", "127.0.0.1:1", "--lease", "l-1"])
    assert args.handler.__name__ == "_pilot"


def test_pilot_without_secret_exits_with_usage_error() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TENANTRY_LEASE_SECRET"}
    out = subprocess.run(
        [sys.executable, "-m", "tenantry", "pilot", "--connect", "127.0.0.1:9", "--lease", "l-1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
    )
    assert out.returncode == 2 and "TENANTRY_LEASE_SECRET" in out.stderr


async def test_a_lease_command_of_a_stopped_session_is_refused(
    state_dir: str, monkeypatch: pytest.MonkeyPatch, alice: Principal, collect: type[Collect]
) -> None:
    """A stop landing after the gates let a command through (before it reached the lease
    manager's queue, so the stop's drain did not see it) still refuses it."""
    monkeypatch.setattr(
        app,
        "COMPONENTS",
        (
            ("kill", "tenantry.safety.kill.component:create"),
            ("leases", "tenantry.leases.component:create"),
        ),
    )
    monkeypatch.setattr(
        app, "OP_MODULES", (*app.OP_MODULES, "tenantry.leases.ops", "tenantry.safety.kill.ops")
    )
    settings = load(env={}, overrides={"state_dir": state_dir, "local_slots": 8})
    async with app.open_runtime(settings) as rt:
        human = Principal(uid=alice.uid, user="alice")
        await REGISTRY["admin.stop_session"].fn(OpContext(human, rt), {"session": "s1"})
        commands = rt.component("commands", CommandService)
        spec = CommandSpec(argv=("sleep", "60"), where="lease")
        with pytest.raises(SessionStopped):
            await asyncio.wait_for(commands.run(alice, spec, collect()), 30)
        assert not rt.component("leases", LeaseManager).leases()  # none started for it
