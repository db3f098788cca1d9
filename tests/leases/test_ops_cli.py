"""Lease ops inside a real daemon runtime, and the CLI surface."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import AsyncIterator

import pytest

from tenantry.cli.main import build_parser
from tenantry.commands.service import CommandService
from tenantry.core.errors import NotFound
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
