"""When audit records reach the disk, and what waits for them.

A gated op starts once its record is written (in the page cache: it survives
the daemon being killed); the request's answer waits until the record is
durable (fsync). Bus events nobody waits for ride along with the next gated
batch, or are written within ``LINGER_S``. The anchor is rewritten in place
between its syncs and always verifies.
"""

from __future__ import annotations

import asyncio
import contextvars
import errno
import json
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import AuditUnavailable
from tenantry.core.events import Bus, Event, EventType
from tenantry.core.models import AgentProduct, Principal
from tenantry.core.settings import load
from tenantry.safety.audit import chain
from tenantry.safety.audit.chain import HEAD_NAME, HEAD_SIZE, LOG_NAME, ChainWriter, verify
from tenantry.safety.audit.component import LINGER_S, AuditLog
from tenantry.service.ops import open_barrier
from tenantry.service.runtime import Runtime

P = Principal(uid=1, user="alice", agent=AgentProduct.CODEX, session="s1")


def actions(d: Path) -> list[str]:
    path = d / LOG_NAME
    if not path.exists():
        return []
    return [json.loads(x)["action"] for x in path.read_text().splitlines()]


async def until(cond: Any, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


@pytest.fixture
async def audit(tmp_path: Path) -> AsyncIterator[AuditLog]:
    settings = load(env={}, overrides={"state_dir": str(tmp_path)})
    rt = Runtime(settings, journal=None, bus=Bus(), backend=None)  # type: ignore[arg-type]
    log = AuditLog(rt, fsync=True)
    await log.start()
    yield log
    await log.aclose()


class HeldSync:
    """Holds the writer's fsync until released (or makes it fail)."""

    def __init__(self, log: AuditLog, fail: bool = False) -> None:
        assert log._writer is not None
        self.writer: ChainWriter = log._writer
        self.real = self.writer.sync
        self.release = threading.Event()
        self.entered = threading.Event()
        self.fail = fail
        self.writer.sync = self.sync  # type: ignore[method-assign]

    def sync(self, *, fsync: bool = True) -> None:
        self.entered.set()
        self.release.wait(10)
        if self.fail:
            # as the writer does on a failed fsync: undo, remember, raise
            size, _seq, _prev, lost, _failure = self.writer._unsynced  # type: ignore[misc]
            self.writer._unsynced = None
            self.writer._undo(size, lost, OSError(errno.EIO, "I/O error"))
            raise OSError(errno.EIO, "I/O error")
        self.real(fsync=fsync)


async def test_the_op_starts_once_written_and_the_answer_waits_for_the_fsync(
    audit: AuditLog,
) -> None:
    held = HeldSync(audit)
    barrier = open_barrier()
    assert await audit.gate(P, "commands.run", "run_command", {"argv": ["true"]}) == []
    # the gate let the op go: its record is in the log (page cache) before the fsync
    assert actions(audit.dir) == ["op:commands.run"]
    answer = asyncio.ensure_future(barrier.wait())
    await until(held.entered.is_set, "the fsync to start")
    for _ in range(20):
        await asyncio.sleep(0)
    assert not answer.done()  # the answer waits for the record to be durable
    held.release.set()
    await asyncio.wait_for(answer, 10)


async def test_without_a_reply_barrier_the_gate_waits_for_the_fsync(audit: AuditLog) -> None:
    held = HeldSync(audit)
    # a caller that answers by other means (no barrier): the gate itself waits
    gate = asyncio.get_running_loop().create_task(
        audit.gate(P, "facility.info", None, {}), context=contextvars.Context()
    )
    await until(held.entered.is_set, "the fsync to start")
    for _ in range(20):
        await asyncio.sleep(0)
    assert not gate.done()
    held.release.set()
    assert await asyncio.wait_for(gate, 10) == []


async def test_a_failed_fsync_refuses_the_answer(audit: AuditLog) -> None:
    held = HeldSync(audit, fail=True)
    barrier = open_barrier()
    await audit.gate(P, "commands.run", "run_command", {"argv": ["true"]})
    held.release.set()
    with pytest.raises(AuditUnavailable):
        await asyncio.wait_for(barrier.wait(), 10)
    assert actions(audit.dir) == []  # the unsynced record was taken back


async def test_bus_events_ride_the_next_gated_batch_or_wait_at_most_the_linger(
    audit: AuditLog,
) -> None:
    await audit.runtime.bus.publish(Event(EventType.COMMAND_STARTED, P.key, "c1"))
    assert actions(audit.dir) == []  # nobody waits for it: not a batch of its own yet
    await audit.gate(P, "jobs.list", "query_jobs", {})
    assert actions(audit.dir) == ["command.started", "op:jobs.list"]
    t0 = time.monotonic()
    await audit.runtime.bus.publish(Event(EventType.COMMAND_FINISHED, P.key, "c1"))
    await until(lambda: "command.finished" in actions(audit.dir), "the lingering event")
    assert time.monotonic() - t0 >= LINGER_S * 0.9
    report = verify(audit.dir, audit._writer.key if audit._writer else None)
    assert report.ok and report.records == 3, report


async def test_the_anchor_is_one_block_rewritten_in_place_and_verifies(
    audit: AuditLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chain, "HEAD_SYNC_S", 3600.0)  # no whole rewrite during the test
    for i in range(5):
        await audit.record(P, "x", {"i": i}, "allow")
    head = audit.dir / HEAD_NAME
    before = head.stat().st_ino
    await audit.record(P, "x", {"i": 5}, "allow")
    assert head.stat().st_ino == before  # rewritten in place, not replaced
    assert head.stat().st_size == HEAD_SIZE
    assert json.loads(head.read_text())["seq"] == 6
    key = audit._writer.key if audit._writer else None
    report = verify(audit.dir, key)
    assert report.ok and report.records == 6 and not report.warnings
