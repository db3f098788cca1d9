"""The policy facts are refreshed while the daemon runs, not only read at its start."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from tenantry.backends.fake import FakeBackend
from tenantry.core.events import Bus
from tenantry.core.settings import load
from tenantry.safety.policy.component import create
from tenantry.service.runtime import Runtime


class GrowingCluster(FakeBackend):
    """A backend whose partitions change while the daemon runs (a new partition appears)."""

    def __init__(self) -> None:
        super().__init__()
        self.partitions: list[dict[str, Any]] = [{"name": "debug", "max_time_s": 3600}]

    async def info(self) -> dict[str, Any]:
        return {"backend": "slurm", "partitions": list(self.partitions)}


async def _until(cond: Any, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        await asyncio.sleep(0.02)
    return False


def _runtime(state: Path, backend: FakeBackend, refresh: str) -> Runtime:
    settings = load(
        env={
            "TENANTRY_STATE_DIR": str(state),
            "TENANTRY_BACKEND": "slurm",
            "TENANTRY_POLICY_FILE": str(state / "none.cedar"),
            "TENANTRY_POLICY_FACTS_REFRESH_S": refresh,
        }
    )
    return Runtime(settings, None, Bus(), backend)  # type: ignore[arg-type]


async def test_new_partition_is_seen_without_a_restart(tmp_path: Path) -> None:
    cluster = GrowingCluster()
    svc = create(_runtime(tmp_path, cluster, "0.1"))
    await svc.start()
    try:
        assert svc.judge is not None
        assert set(svc.judge.facts.partitions) == {"debug"}
        cluster.partitions.append({"name": "gpu", "max_time_s": 1800})
        judge = svc.judge
        assert await _until(lambda: "gpu" in judge.facts.partitions), "facts never refreshed"
        assert judge.facts.partitions["gpu"].max_time_s == 1800
    finally:
        await svc.aclose()


async def test_zero_reads_facts_only_at_start(tmp_path: Path) -> None:
    cluster = GrowingCluster()
    svc = create(_runtime(tmp_path, cluster, "0"))
    await svc.start()
    try:
        first = svc.facts_refreshed_at
        assert first > 0 and len(svc._tasks) == 0
        cluster.partitions.append({"name": "gpu"})
        await asyncio.sleep(0)  # nothing is scheduled that could pick it up
        assert svc.judge is not None and "gpu" not in svc.judge.facts.partitions
    finally:
        await svc.aclose()
