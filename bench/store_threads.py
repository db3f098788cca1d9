"""Threads of an idle daemon runtime (fake backend): all, and db-writer threads.

python bench/store_threads.py
"""

import asyncio, sys, tempfile, threading
from tenantry.gateway.app import open_runtime
from tenantry.settings import load
from tenantry.backends.fake import FakeBackend


async def main():
    with tempfile.TemporaryDirectory() as d:
        s = load(env={}, overrides={"state_dir": d, "backend": "fake", "policy_file": ""})
        async with open_runtime(s, FakeBackend()) as rt:
            await asyncio.sleep(0.5)
            names = [t.name for t in threading.enumerate()]
            print(
                len(names),
                sum(n == "db-writer" for n in names),
                sorted(set(n.rstrip("_0123456789") for n in names)),
            )


asyncio.run(main())
