"""CPU cost of the journal event a recall writes, by batch size.

    PYTHONPATH=src python bench/memory_journal.py [--events 2000]

Appends ``memory.recall`` events (the payload a recall emits: five lesson ids)
to a real ``Journal`` on a temporary SQLite file, with the daemon's secret
redactor, flushing every 1, 2, 10 or 50 events (the daemon flushes at most
50 ms after an event, so under load several recalls share a flush), and
prints the process CPU time per event (encoding, redaction, the INSERT and
the commit). See bench/memory.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path

from tenantry.core.events import Event, EventType
from tenantry.gateway.app import redact_secrets
from tenantry.store.journal import Journal


async def measure(n: int) -> dict[int, float]:
    out: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal(Path(tmp) / "journal.sqlite3")
        journal.redact = redact_secrets
        await journal.start()
        try:
            for batch in (1, 2, 10, 50):
                c0 = time.process_time()
                for _ in range(0, n, batch):
                    for _ in range(batch):
                        await journal.add_event(
                            Event(
                                EventType.MEMORY_RECALL,
                                principal="eval/claude-code/bench",
                                outcome="5",
                                duration_s=0.01,
                                data={"returned": [f"L{i:010x}" for i in range(5)]},
                            )
                        )
                    await journal.flush()
                out[batch] = (time.process_time() - c0) * 1000 / n
        finally:
            await journal.aclose()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--events", type=int, default=2000)
    args = ap.parse_args()
    res = asyncio.run(measure(args.events))
    for batch, ms in res.items():
        print(f"flush every {batch:>2} events: {ms:.3f} ms CPU per event")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
