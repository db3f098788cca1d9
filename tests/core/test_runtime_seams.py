"""The typed seams: every slot of a daemon's Runtime is filled by its provider, gates in order."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenantry.backends.fake import FakeBackend
from tenantry.commands.runner import LocalRunner
from tenantry.core.events import Bus
from tenantry.core.models import Principal
from tenantry.core.settings import load
from tenantry.gateway.app import open_runtime
from tenantry.leases.manager import LeaseManager
from tenantry.memory.component import MemoryService
from tenantry.safety.audit.component import AuditLog
from tenantry.safety.budgets.service import BudgetService
from tenantry.safety.kill.component import KillSwitch
from tenantry.safety.policy.component import PolicyService
from tenantry.service.runtime import Runtime


@pytest.fixture
async def runtime() -> AsyncIterator[Runtime]:
    with tempfile.TemporaryDirectory(prefix="tnt-") as state:  # short: socket paths
        os.chmod(state, 0o700)
        settings = load(env={}, overrides={"state_dir": state})
        async with open_runtime(settings, FakeBackend()) as rt:
            yield rt


async def test_every_slot_is_filled_by_its_provider(runtime: Runtime) -> None:
    assert isinstance(runtime.runner, LocalRunner)
    assert runtime.runner is runtime.components["runner"]
    assert isinstance(runtime.leases, LeaseManager)
    assert runtime.leases is runtime.components["leases"]
    assert isinstance(runtime.lessons, MemoryService)
    assert isinstance(runtime.budgets, BudgetService)
    kinds = [type(g) for g in runtime.ordered_gates()]
    assert kinds == [KillSwitch, PolicyService, BudgetService, AuditLog]


class _Gate:
    def __init__(self, name: str, seen: list[str]) -> None:
        self.name, self.seen = name, seen

    async def gate(
        self, principal: Principal, op_name: str, action: str | None, params: dict[str, Any]
    ) -> list[str]:
        self.seen.append(self.name)
        return []


def test_gates_of_other_names_run_before_audit(tmp_path: Path) -> None:
    rt = Runtime(load(env={}, overrides={"state_dir": str(tmp_path)}), None, Bus(), None)  # type: ignore[arg-type]
    seen: list[str] = []
    for name in ("audit", "guard", "budgets", "kill", "policy"):
        rt.gates[name] = _Gate(name, seen)
    assert [g.name for g in rt.ordered_gates()] == [  # type: ignore[attr-defined]
        "kill",
        "policy",
        "budgets",
        "guard",
        "audit",
    ]
