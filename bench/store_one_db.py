"""Interactive write latency while the index crawls: one database or the index apart.

    python bench/store_one_db.py [--files 4000] [--runs 3]

Builds a tree of ``--files`` small text files, then, per layout, crawls it with
the real ``IndexService`` while a journal on the daemon's store records a
command every 2 ms (``Journal.command_started``, the synchronous write on an
agent's request path), and reports the write latency (p50, p99, max) during
the crawl and the crawl's duration, medians over ``--runs``:

- ``apart``: the index in ``index.sqlite3``, the journal in ``tenantry.sqlite3``
  (two writer threads);
- ``shared``: the index's tables in the daemon's one database (one writer thread).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from _common import pct
from tenantry.core.events import Bus
from tenantry.core.models import AgentProduct, Principal
from tenantry.core.settings import load
from tenantry.index.component import SCHEMA, IndexService
from tenantry.service.runtime import Runtime
from tenantry.store.engine import Store
from tenantry.store.journal import Journal
from tenantry.store.sqlite import SQLiteStore

AGENT = Principal(1000, "ann", AgentProduct.CODEX, "s1")


class Borrowed:
    """The daemon's store lent to the index: migrated into, never closed by it."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def start(self) -> None:
        await self._store.migrate(SCHEMA)

    async def aclose(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def tree(root: Path, files: int) -> None:
    line = "def handler(request, response):  # some code words for trigrams\n"
    for i in range(files):
        d = root / f"pkg{i % 40}" / f"mod{i % 7}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_text(f"# file {i}\n" + line * 30)


async def one(layout: str, src: Path, state: Path) -> dict[str, float]:
    state.mkdir()
    settings = load(env={}, overrides={"state_dir": str(state), "index_watch": False})
    main = SQLiteStore(state / "tenantry.sqlite3")
    await main.start()
    journal = Journal(main)
    await journal.start()
    rt = Runtime(settings, journal, Bus(), None)  # type: ignore[arg-type]
    svc = IndexService(rt)
    if layout == "shared":
        svc.db = Borrowed(main)  # type: ignore[assignment]
    await svc.start()
    lat: list[float] = []
    done = asyncio.Event()

    async def writer() -> None:
        i = 0
        while not done.is_set():
            t0 = time.perf_counter()
            await journal.command_started(f"c{i}", AGENT, ["pytest", "-x"], "/w", "local")
            lat.append((time.perf_counter() - t0) * 1000)
            i += 1
            await asyncio.sleep(0.002)

    task = asyncio.create_task(writer())
    t0 = time.perf_counter()
    await svc.add(str(src), wait=True)
    crawl = time.perf_counter() - t0
    done.set()
    await task
    await svc.aclose()
    await journal.aclose()
    await main.aclose()
    return {
        "crawl_s": crawl,
        "p50_ms": pct(lat, 0.5),
        "p99_ms": pct(lat, 0.99),
        "max_ms": max(lat),
        "writes": float(len(lat)),
    }


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=4000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tt-store-bench-") as tmp:
        src = Path(tmp) / "src"
        tree(src, args.files)
        results: dict[str, list[dict[str, float]]] = {"apart": [], "shared": []}
        for run in range(args.runs):
            for layout in ("apart", "shared"):
                results[layout].append(await one(layout, src, Path(tmp) / f"{layout}{run}"))
        load1 = os.getloadavg()[0]
        print(f"files={args.files} runs={args.runs} loadavg(1m)={load1:.2f}")
        print(
            f"{'layout':8} {'crawl s':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'writes':>7}"
        )
        for layout, rows in results.items():
            med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
            print(
                f"{layout:8} {med['crawl_s']:8.2f} {med['p50_ms']:8.2f} {med['p99_ms']:8.2f}"
                f" {med['max_ms']:8.1f} {med['writes']:7.0f}"
            )


if __name__ == "__main__":
    asyncio.run(main())
