"""Background tasks: failures are logged, recorded and shown; loops restart."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from tenantry.core import tasks
from tenantry.core.tasks import TaskGroup


async def test_a_failed_task_makes_its_component_unhealthy(
    caplog: pytest.LogCaptureFixture,
) -> None:
    group = TaskGroup("unit-a")

    async def boom() -> None:
        raise OSError(24, "Too many open files")

    task = group.spawn(boom(), "opener")
    with pytest.raises(OSError):
        await task
    await asyncio.sleep(0)  # the done callback runs on the next loop turn
    h = group.health()
    assert not h["healthy"] and h["failures"][0]["task"] == "opener"
    assert "Too many open files" in h["failures"][0]["error"]
    assert "Traceback" in caplog.text
    assert any(r["component"] == "unit-a" and not r["healthy"] for r in tasks.health())
    await group.aclose()


async def test_a_supervised_loop_is_restarted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tasks, "RESTART_MIN_S", 0.01)
    group = TaskGroup("unit-b")
    runs = 0
    again = asyncio.Event()

    async def loop() -> None:
        nonlocal runs
        runs += 1
        if runs < 3:
            raise RuntimeError("poll failed")
        again.set()
        await asyncio.Event().wait()

    group.supervise("poller", loop)
    await asyncio.wait_for(again.wait(), 10)
    assert group.restarts["poller"] == 2 and len(group.failures) == 2
    await group.aclose()
    assert len(group) == 0


async def test_every_logs_a_failed_tick_and_runs_the_next(
    caplog: pytest.LogCaptureFixture,
) -> None:
    ticks = 0
    third = asyncio.Event()

    async def tick() -> None:
        nonlocal ticks
        ticks += 1
        if ticks == 3:
            third.set()
        if ticks == 1:
            raise OSError("disk full")

    task = asyncio.create_task(tasks.every(0.0, tick, tasks.log, "unit tick"))
    async with asyncio.timeout(10):
        await third.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "unit tick failed" in caplog.text and "disk full" in caplog.text


async def test_every_can_tick_at_once_and_logs_its_own_errors_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tenantry.core.errors import Unavailable

    seen = asyncio.Event()

    async def tick() -> None:
        seen.set()
        raise Unavailable("slurmdbd did not answer", hint="later")

    task = asyncio.create_task(tasks.every(3600.0, tick, tasks.log, "unit facts", first_now=True))
    async with asyncio.timeout(10):
        await seen.wait()  # before the first interval: it ticked at once
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (record,) = [r for r in caplog.records if "unit facts" in r.getMessage()]
    assert record.levelname == "WARNING" and record.exc_info is None
    assert record.getMessage() == "unit facts failed: slurmdbd did not answer (later)"


async def test_close_cancels_again_a_task_that_let_a_cancellation_pass(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loop whose cancellation was lost (as Python 3.11's ``wait_for`` loses one
    that meets its inner result) goes on; the close cancels it again, so the
    daemon's stop ends."""
    monkeypatch.setattr(tasks, "RECANCEL_S", 0.05)
    group = TaskGroup("unit-stubborn")
    lost = 0

    async def poller() -> None:
        nonlocal lost
        while True:
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                if lost:
                    raise
                lost += 1  # this one is lost, the loop goes on

    group.spawn(poller(), "poller")
    await asyncio.sleep(0)
    await asyncio.wait_for(group.aclose(), 10)
    assert lost == 1 and len(group) == 0
    assert "still running after cancel, again: unit-stubborn:poller" in caplog.text


async def test_close_leaves_behind_a_task_that_never_ends_and_says_so(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tasks, "RECANCEL_S", 0.05)
    monkeypatch.setattr(tasks, "CLOSE_GIVE_UP_S", 0.3)
    group = TaskGroup("unit-deaf")
    stop = asyncio.Event()

    async def deaf() -> None:
        while not stop.is_set():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(3600)

    task = group.spawn(deaf(), "deaf")
    await asyncio.sleep(0)
    await asyncio.wait_for(group.aclose(), 10)
    assert "unit-deaf: left running at close: unit-deaf:deaf" in caplog.text
    stop.set()
    task.cancel()
    await asyncio.wait([task], timeout=5)
    assert task.done()
