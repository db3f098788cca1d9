"""``core/spawn.py``: the posix_spawn start the spawner and the lease pilot share."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from tenantry.core.spawn import close_on_exec_all, ignored_signals, spawn

from ..path_tools import path_tools


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    out_r, out_w = os.pipe()
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        pid = spawn(argv, str(cwd), env, stdin=null, stdout=out_w, stderr=out_w, default_signals=())
    finally:
        os.close(out_w)
        os.close(null)
    with os.fdopen(out_r) as fh:
        text = fh.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), text


def test_the_program_is_found_on_the_commands_path_and_this_process_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # spawn changes this process's directory
    env = path_tools(tmp_path)
    assert _run(["tnt-only-here"], tmp_path, env) == (0, f"found\n{tmp_path}\n")
    with pytest.raises(PermissionError):
        _run(["plain"], tmp_path, env)
    with pytest.raises(FileNotFoundError):
        _run(["tnt-only-here"], tmp_path, {"PATH": "/usr/bin:/bin"})
    with pytest.raises(FileNotFoundError):
        _run(["true"], tmp_path / "gone", env)
    # the C environment (what a child started with env=None gets) is this process's again
    mine = subprocess.run(["sh", "-c", 'echo "$PATH"'], capture_output=True, text=True)
    assert mine.stdout.strip() == os.environ["PATH"]


def test_inherited_descriptors_are_closed_on_exec_and_ignored_signals_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    r, w = os.pipe()
    os.set_inheritable(r, True)
    try:
        close_on_exec_all()
        assert not os.get_inheritable(r)
        code, fds = _run(["ls", "/proc/self/fd"], tmp_path, {"PATH": "/usr/bin:/bin"})
        assert code == 0 and set(fds.split()) <= {"0", "1", "2", "3"}, fds  # 3: ls's own
    finally:
        os.close(r)
        os.close(w)
    old = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        assert signal.SIGUSR2 in ignored_signals()
    finally:
        signal.signal(signal.SIGUSR2, old)
    assert signal.SIGUSR2 not in ignored_signals()
