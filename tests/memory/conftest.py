"""Fixtures for the memory tests: a started MemoryService on a real SQLite file."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tenantry.core.events import Bus
from tenantry.core.models import AgentProduct, Principal
from tenantry.core.settings import load
from tenantry.memory import FakeProber, MemoryService, PartitionInfo
from tenantry.service.runtime import Runtime


def principal(
    user: str, session: str = "s1", *, project: str = "", human: bool = False
) -> Principal:
    agent = AgentProduct.HUMAN if human else AgentProduct.CLAUDE_CODE
    return Principal(uid=1000, user=user, agent=agent, session=session, project=project)


@pytest.fixture
def prober() -> FakeProber:
    return FakeProber(
        partitions={
            "debug": PartitionInfo("debug", max_time_s=1800, max_nodes=2, state="UP"),
            "gpu": PartitionInfo("gpu", max_time_s=86400, max_nodes=4, state="UP"),
        },
        modules={"gcc/12.2.0", "cuda/12.2", "openmpi/4.1.5"},
    )


@pytest.fixture
def runtime(state_dir: str) -> Runtime:
    settings = load(
        env={},
        overrides={
            "state_dir": state_dir,
            "memory_staff": "root,ops",
            "memory_verify_interval_s": 0.0,
        },
    )
    return Runtime(settings, journal=None, bus=Bus(), backend=None)  # type: ignore[arg-type]


@pytest.fixture
async def service(runtime: Runtime, prober: FakeProber) -> AsyncIterator[MemoryService]:
    svc = MemoryService(runtime, prober=prober)
    runtime.components["memory"] = svc
    await svc.start()
    try:
        yield svc
    finally:
        await svc.aclose()
