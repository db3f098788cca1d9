"""Group commit keeps the audit log's crash guarantee: every answered request is on disk.

Records are written in batches with one fsync per batch, and the anchor is
fsynced at most every half second. A daemon SIGKILLed in the middle of a burst
of requests must still have, for every request that got an answer, its audit
record; the chain must verify (records past the anchor are "in flight", never
tampering) and continue after a restart.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenantry.core.errors import TenantryError
from tenantry.safety.audit.chain import iter_records, load_key, verify
from tenantry.safety.audit.component import audit_paths

from .conftest import ITERATIONS

gw: Any = sys.modules["_tenantry_gateway_test_helpers"]  # loaded by tests/conftest.py


def _answered_records(directory: Path) -> int:
    return sum(
        1
        for _n, rec, _raw in iter_records(directory)
        if rec is not None and rec.get("action") == "op:facility.info"
    )


def _burst(d: Any, answered: list[int], i: int, stop: threading.Event) -> None:
    c = d.client()
    while not stop.is_set():
        try:
            c.call("facility.info")
        except TenantryError:
            return  # the daemon died under it
        answered[i] += 1


def test_answered_requests_survive_a_sigkill_mid_burst(fault_daemon: Callable[..., Any]) -> None:
    for _ in range(ITERATIONS):
        d = fault_daemon()
        answered = [0, 0]
        stop = threading.Event()
        threads = [
            threading.Thread(target=_burst, args=(d, answered, i, stop), daemon=True)
            for i in range(2)
        ]
        for t in threads:
            t.start()
        gw.wait_for(lambda a=answered: sum(a) >= 40, what="a burst of answered requests")
        d.kill(signal.SIGKILL)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        directory, key_path = audit_paths(d.settings)
        key = load_key(key_path, create=False) if key_path else None
        # every request that was answered had its record durable before the op ran
        assert _answered_records(directory) >= sum(answered)
        report = verify(directory, key)
        assert report.ok, report.problems
        # the next daemon continues the chain after what the crash left
        d.start()
        d.client().call("facility.info")
        d.stop()
        after = verify(directory, key)
        assert after.ok, after.problems
        assert after.records > report.records and not after.warnings
