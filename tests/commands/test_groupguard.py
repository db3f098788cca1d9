"""The group guard: commands spawn without a preexec_fn and still end with the daemon.

The measured cost: every command was spawned with a ``preexec_fn`` (a full
fork of the big daemon, Python code in the child) only to set
``PR_SET_PDEATHSIG``; the guard ends the command's whole process group when
the daemon's end of its pipe closes, however the daemon dies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tenantry.commands.groupguard import Guard
from tenantry.commands.runner import LocalRunner
from tenantry.core.models import CommandSpec, Principal, Resources

ME = Principal(1000, "alice")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(cond: Any, what: str, deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _group(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int]:
    """A leader in its own session with a background child (both sleeping)."""
    child = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {child}; sleep 300"
    proc = subprocess.Popen(["sh", "-c", script], start_new_session=True)
    _wait(lambda: child.exists() and child.read_text().strip(), "the background child")
    return proc, int(child.read_text())


def test_the_whole_group_ends_when_the_daemon_side_closes(tmp_path: Path) -> None:
    guard = Guard()
    assert guard.start()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    kept, kept_child = _group(tmp_path / "a")
    done, done_child = _group(tmp_path / "b")
    try:
        guard.add(kept.pid)
        guard.add(done.pid)
        guard.remove(done.pid)  # reaped by the runner: no longer the guard's
        # the daemon dies: its end of the pipe closes, nothing else happens
        assert guard._wfd is not None
        os.close(guard._wfd)
        guard._wfd = None
        _wait(lambda: not _alive(kept_child), "the registered group's background child to end")
        kept.wait(timeout=20)
        assert kept.returncode == -signal.SIGKILL
        assert _alive(done_child) and done.poll() is None  # removed: left alone
    finally:
        guard.close()
        for p in (done, kept):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for pid in (kept_child, done_child):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


async def test_a_guarded_runner_spawns_without_preexec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[Any] = []
    real = subprocess.Popen

    def spy(*args: Any, **kw: Any) -> Any:
        seen.append(kw.get("preexec_fn"))
        return real(*args, **kw)

    runner = LocalRunner(spawner=False)  # spawning in the daemon (no spawner process)
    await runner.start()  # starts the guard (a Popen of its own)
    monkeypatch.setattr(subprocess, "Popen", spy)  # the one module the runner uses
    try:

        async def drop(stream: str, data: bytes) -> None:
            return None

        plain = CommandSpec(argv=("true",), cwd=str(tmp_path))
        capped = CommandSpec(argv=("true",), cwd=str(tmp_path), resources=Resources(mem_mb=512))
        assert (await runner.run(plain, ME, drop)).exit_code == 0
        assert (await runner.run(capped, ME, drop)).exit_code == 0
    finally:
        await runner.aclose()
    assert runner.guard.alive is False  # closed with the runner
    assert len(seen) == 2
    assert seen[0] is None  # vfork-able: nothing runs in a forked copy of the daemon
    assert seen[1] is not None  # an address-space limit still needs the child-side setup
