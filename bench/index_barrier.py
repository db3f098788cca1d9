"""The index's freshness barrier alone, in-process: what a query pays before it reads.

    PYTHONPATH=src python bench/index_barrier.py [--n 300]

An ``IndexService`` with inotify on (no daemon, no HTTP) over the workspace
``bench/client_paths.py`` builds (20 directories of 25 ``.py`` files), on a
local file system. It times, one call after another: ``wait_fresh`` (the
barrier: a drain of the loop's inotify descriptor, or a cookie through the
change feed in code without the drain) and the whole ``index.find`` op of
``client_paths`` (``--name '*.py'``, 50 results) without the gateway, and
prints their p50, how many barriers used a cookie and how many drained, and
the load average. Run it against two source trees (``PYTHONPATH``) to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from _common import small_workspace
from tenantry.core.events import Bus
from tenantry.core.settings import load
from tenantry.index import ops as index_ops
from tenantry.index.component import IndexService
from tenantry.service.ops import OpContext
from tenantry.service.runtime import Runtime


async def p50_ms(call: Callable[[], Awaitable[Any]], n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        times.append(time.perf_counter() - t0)
    return round(statistics.median(times) * 1e3, 3)


async def main(n: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="tnt-barrier-bench-"))
    ws = tmp / "ws"
    small_workspace(ws)
    settings = load(env={}, overrides={"state_dir": str(tmp / "state"), "index_sweep_s": 0})
    runtime = Runtime(settings, journal=None, bus=Bus(), backend=None)  # type: ignore[arg-type]
    svc = IndexService(runtime)
    runtime.components["index"] = svc

    async def no_emit(_event: Any) -> None:
        return None

    runtime.emit = no_emit  # type: ignore[method-assign,assignment]  # bus and audit: not measured
    load0 = os.getloadavg()[0]
    await svc.start()
    try:
        await svc.add(str(ws), wait=True)
        await svc.settle()
        scope = svc.resolve(str(ws))
        ctx = OpContext(SimpleNamespace(key="bench"), runtime)  # type: ignore[arg-type]
        params = {"path": str(ws), "name": "*.py", "limit": 50}
        out = {
            "wait_fresh_p50_ms": await p50_ms(lambda: svc.wait_fresh(scope), n),
            "find_op_p50_ms": await p50_ms(lambda: index_ops.find(ctx, params), n),
            "counters": {k: v for k, v in svc.status().items() if k in ("barriers", "drains")},
        }
    finally:
        await svc.aclose()
    out["load_avg"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300, help="calls of each")
    logging.disable(logging.WARNING)
    print(json.dumps(asyncio.run(main(ap.parse_args().n)), indent=2))
