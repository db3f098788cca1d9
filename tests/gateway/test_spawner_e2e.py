"""Commands through a real daemon are spawned, watched and reaped by its spawner process.

The measured cost: every command's vfork, pipes, exit watch and reaping ran
on the daemon's one event loop (a third of its CPU per command) while the
second core idled. Now a small process does it; these tests hold that, and
that its death neither hangs a command nor leaves one running.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from .conftest import Daemon, wait_for

pytestmark = pytest.mark.own_daemon  # the spawner of each daemon is looked at or killed


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


def _spawner(daemon: Daemon) -> int:
    assert daemon.proc is not None
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            parent = _parent(int(entry.name))
        except OSError:
            continue
        if parent == daemon.proc.pid and b"tenantry.commands.spawner" in cmdline:
            return int(entry.name)
    raise AssertionError("the daemon has no spawner process")


def _gone(pid: int) -> bool:
    """Exited: no such process, or only its zombie left."""
    try:
        return "(zombie)" in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True


def test_a_command_is_the_spawners_child_not_the_daemons(daemon: Daemon, tmp_path: Path) -> None:
    r = daemon.cli("run", "--json", "--", "sh", "-c", "echo $PPID; echo err >&2; exit 3")
    res = json.loads(r.stdout)
    assert (res["exit_code"], res["state"]) == (3, "failed")
    assert res["stderr_tail"] == "err\n"
    assert int(res["stdout_tail"]) == _spawner(daemon)  # not the daemon's pid
    assert res["max_rss_kb"] > 0 and res["cpu_s"] >= 0
    missing = json.loads(daemon.cli("run", "--json", "--", "no-such-tnt-cmd").stdout)
    assert missing["exit_code"] == 127


def test_the_spawners_death_ends_its_commands_and_the_daemon_goes_on(
    daemon: Daemon, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    c = daemon.client()
    spawner = _spawner(daemon)
    script = f"echo $$ > {pidfile}; exec sleep 300"
    chunks: list[dict[str, object]] = []
    err: list[BaseException] = []

    def run() -> None:
        try:
            chunks.extend(c.stream("commands.run", {"argv": ["sh", "-c", script]}))
        except BaseException as exc:  # the error the daemon answers with
            err.append(exc)

    t = threading.Thread(target=run)
    t.start()
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), what="the command runs")
    command = int(pidfile.read_text())
    os.kill(spawner, signal.SIGKILL)
    t.join(30)
    assert not t.is_alive(), "the command's request hangs after its spawner died"
    assert err or chunks, "the request got no answer"
    wait_for(lambda: _gone(command), what="the orphaned command to be ended")
    # the daemon is up, and runs the next command through a new spawner
    again = json.loads(daemon.cli("run", "--json", "--", "sh", "-c", "echo $PPID").stdout)
    assert int(again["stdout_tail"]) == _spawner(daemon) != spawner
