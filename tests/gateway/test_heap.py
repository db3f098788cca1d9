"""The daemon freezes its start-up heap once its runtime is open (``settle_heap``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tenantry.backends.fake import FakeBackend
from tenantry.core.settings import load
from tenantry.gateway.app import create_app
from tenantry.service.runtime import Runtime


async def test_on_ready_runs_once_the_runtime_is_open(tmp_path: Path) -> None:
    settings = load(env={}, overrides={"state_dir": str(tmp_path / "state"), "backend": "fake"})
    seen: list[object] = []
    app = create_app(settings, FakeBackend(), on_ready=lambda: seen.append(app.state.runtime))
    assert seen == []
    async with app.router.lifespan_context(app):
        assert len(seen) == 1 and isinstance(seen[0], Runtime)
    assert len(seen) == 1


def test_settle_heap_freezes_what_survives_a_collection() -> None:
    code = (
        "import gc\n"
        "from tenantry.gateway.server import settle_heap\n"
        "before = gc.get_freeze_count()\n"
        "settle_heap()\n"
        "print(before, gc.get_freeze_count(), len(gc.get_objects()))\n"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"},
    ).stdout.split()
    before, frozen, tracked = (int(x) for x in out)
    assert before == 0
    assert frozen > 1000  # the modules a daemon imports: far more than what is left tracked
    assert tracked < frozen
