"""Live facts: partition limits read from a real Slurm through the Slurm backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantry.core.events import Bus
from tenantry.core.models import AgentProduct, Principal
from tenantry.core.settings import load
from tenantry.safety.policy.component import create
from tenantry.service.runtime import Runtime

pytestmark = pytest.mark.slurm

AGENT = Principal(0, "root", AgentProduct.CLAUDE_CODE, "s-live")


async def test_partition_limits_come_from_the_controller(slurm: None, tmp_path: Path) -> None:
    slurm_backend = pytest.importorskip("tenantry.backends.slurm")
    settings = load(
        env={},
        overrides={
            "state_dir": str(tmp_path),
            "backend": "slurm",
            "policy_file": str(tmp_path / "none.cedar"),
        },
    )
    backend = slurm_backend.SlurmBackend(settings)
    await backend.start()
    try:
        rt = Runtime(settings, None, Bus(), backend)  # type: ignore[arg-type]
        svc = create(rt)
        await svc.start()
        assert svc.judge is not None
        parts = svc.judge.facts.partitions
        assert parts, "no partitions read from the controller"
        name, part = next((n, p) for n, p in parts.items() if p.max_time_s > 0)
        over = part.max_time_s // 60 + 5
        d = svc.check(AGENT, "submit_job", {"argv": ["sbatch", "-p", name, f"-t{over}", "x.sh"]})
        assert (d.allowed, d.rule) == (False, "job-over-partition-time")
        d = svc.check(AGENT, "submit_job", {"argv": ["sbatch", "-p", "no-such-part", "x.sh"]})
        assert d.rule == "job-unknown-partition" and name in d.message
        ok = svc.check(AGENT, "submit_job", {"argv": ["sbatch", "-p", name, "-t1", "x.sh"]})
        assert ok.allowed, ok.message
        await svc.aclose()
    finally:
        await backend.aclose()
