"""What a daemon that hangs or stops slowly tells: stacks on SIGUSR1, slow closes named."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tenantry.gateway import app as app_mod

from ..conftest import stop_daemon
from .conftest import Daemon, wait_for


def test_sigusr1_writes_every_threads_stack_and_the_daemon_goes_on(daemon: Daemon) -> None:
    assert daemon.proc is not None
    daemon.proc.send_signal(signal.SIGUSR1)
    # the main thread's stack (written last) runs through the daemon's entry point
    wait_for(lambda: "tenantry/gateway/server.py" in daemon.log(), timeout=10.0, what="stacks")
    log = daemon.log()
    assert "Thread 0x" in log and "most recent call first" in log, log[-3000:]
    r = daemon.cli("run", "--", "true")
    assert r.returncode == 0, r.stderr


class _Slow:
    def __init__(self, s: float) -> None:
        self.s = s

    async def aclose(self) -> None:
        await asyncio.sleep(self.s)


def test_a_component_slow_to_close_is_named(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app_mod, "SLOW_CLOSE_S", 0.1)
    with caplog.at_level(logging.WARNING, logger=app_mod.__name__):
        asyncio.run(app_mod._timed_close("index", _Slow(0.0)))
        assert not caplog.records
        asyncio.run(app_mod._timed_close("index", _Slow(0.3)))
    said = [r.getMessage() for r in caplog.records]
    # named while it is still closing (a close that never ends is named too), then done
    assert said[0] == "closing index: still under way after 0.1 s", said
    assert said[-1].startswith("closing index took "), said
    assert all(m.startswith("closing index") for m in said), said


def test_a_component_that_never_closes_is_named_while_the_stop_waits(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(app_mod, "SLOW_CLOSE_S", 0.1)

    async def stop() -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(app_mod._timed_close("leases", _Slow(60.0)), 0.6)

    with caplog.at_level(logging.WARNING, logger=app_mod.__name__):
        asyncio.run(stop())
    said = [r.getMessage() for r in caplog.records]
    assert "closing leases: still under way after 0.1 s" in said, said
    assert "closing leases: still under way after 0.4 s" in said, said


def test_stop_daemon_kills_one_that_ignores_sigterm_and_fails_with_its_stacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tests.conftest as top

    monkeypatch.setattr(top, "STOP_WAIT_S", 0.5)
    log = tmp_path / "daemon.log"
    code = (
        "import faulthandler, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
        "print('up', flush=True)\n"
        "while True: time.sleep(0.05)\n"
    )
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-c", code], stdout=out, stderr=out)
    wait_for(lambda: "up" in log.read_text(), timeout=10.0, what="the stand-in")
    with pytest.raises(AssertionError, match=r"did not stop in 0\.5 s") as seen:
        stop_daemon(proc, log)
    assert proc.returncode == -signal.SIGKILL
    assert "most recent call first" in str(seen.value)
