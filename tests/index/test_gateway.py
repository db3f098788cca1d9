"""Through the real gateway runtime: a command run by ``commands.run`` updates the index."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tenantry.core.models import Principal
from tenantry.core.settings import load
from tenantry.gateway import app
from tenantry.service.ops import REGISTRY, OpContext


async def test_command_through_gateway_refreshes_index(
    tmp_path: Path,
) -> None:
    # the daemon serves the index (wired in gateway/app.py)
    assert "tenantry.index.ops" in app.OP_MODULES
    assert ("index", "tenantry.index.component:create") in app.COMPONENTS
    root = tmp_path / "ws"
    root.mkdir()
    (root / "old.txt").write_text("before\n")
    settings = load(
        env={},
        overrides={
            "state_dir": str(tmp_path / "state"),
            "index_watch": False,
            "index_sweep_s": 0,
            "backend": "fake",
        },
    )
    async with app.open_runtime(settings) as rt:
        ctx = OpContext(Principal(uid=os.getuid(), user="t"), rt)

        async def call(name: str, **params: Any) -> Any:
            return await REGISTRY[name].fn(ctx, params)

        await call("index.add", path=str(root), wait=True)
        # no watcher, no sweep: only the command.finished event can tell the index
        script = "echo needle > new.txt; echo more >> old.txt; rm -f gone.txt"
        chunks = [
            c
            async for c in REGISTRY["commands.run"].fn(
                ctx, {"argv": ["sh", "-c", script], "cwd": str(root)}
            )
        ]
        assert chunks[-1]["result"]["exit_code"] == 0
        hits = await call("index.grep", path=str(root), pattern="needle", files_only=True)
        assert [h["path"] for h in hits["items"]] == [str(root / "new.txt")]
        st = await call("index.stat", path=str(root / "old.txt"))
        assert st["items"][0]["size"] == (root / "old.txt").stat().st_size
