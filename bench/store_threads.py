"""Threads of an idle daemon runtime (fake backend): all, and db-writer threads.

python bench/store_threads.py
"""

from __future__ import annotations

import asyncio
import tempfile
import threading

from tenantry.backends.fake import FakeBackend
from tenantry.core.settings import load
from tenantry.gateway.app import open_runtime


async def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tt-threads-") as d:
        s = load(env={}, overrides={"state_dir": d, "backend": "fake", "policy_file": ""})
        async with open_runtime(s, FakeBackend()):
            await asyncio.sleep(0.5)
            names = [t.name for t in threading.enumerate()]
            kinds = sorted({n.rstrip("_0123456789") for n in names})
            writers = sum(n == "db-writer" for n in names)
            print(f"threads={len(names)} db-writers={writers} kinds={kinds}")


if __name__ == "__main__":
    asyncio.run(main())
