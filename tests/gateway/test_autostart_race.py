"""Autostart while another daemon is still starting: a client waits for it.

The hook gives a starting daemon 8 s; on a loaded login node a start can take
longer, so the next client (the MCP shim, say) finds the state held by a daemon
whose socket is not open yet. It must wait for that daemon, not start a second
one that exits on the state's lock and then report "the daemon did not start".
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from tenantry.client.sync import ensure_daemon, socket_answers, starting_daemon
from tenantry.core.settings import load

# a stand-in daemon: holds the state's lock with its pid in it (as ``take_lock``
# does), opens its socket only after a while, then accepts until it is ended
SLOW_DAEMON = textwrap.dedent(
    """
    import fcntl, os, socket, sys, time
    state, sock_path, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
    lock = open(os.path.join(state, "daemon.lock"), "a+")
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    lock.seek(0); lock.truncate(); lock.write(str(os.getpid())); lock.flush()
    print("locked", flush=True)
    time.sleep(delay)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(sock_path); srv.listen(16)
    while True:
        conn, _ = srv.accept(); conn.close()
    """
)


def _slow_daemon(state: Path, sock: str, delay: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SLOW_DAEMON, str(state), sock, str(delay)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_a_client_waits_for_a_daemon_that_is_still_starting(tmp_path: Path) -> None:
    state = tmp_path / "s"
    state.mkdir(mode=0o700)
    sock = str(state / "sock")
    settings = load(env={"TENANTRY_STATE_DIR": str(state), "TENANTRY_SOCKET": sock})
    slow = _slow_daemon(state, sock, delay=2.0)
    try:
        assert starting_daemon(state) == slow.pid and not socket_answers(sock)
        t0 = time.monotonic()
        ensure_daemon(settings, wait_s=30)  # raised "the daemon did not start" before
        assert socket_answers(sock) and time.monotonic() - t0 < 30
        assert starting_daemon(state) == slow.pid  # no second daemon took the state
    finally:
        slow.kill()
        slow.wait()


def test_a_dead_daemons_pid_in_the_lock_does_not_count(tmp_path: Path) -> None:
    state = tmp_path / "s"
    state.mkdir(mode=0o700)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (state / "daemon.lock").write_text(str(gone.pid))
    assert starting_daemon(state) == 0
    (state / "daemon.lock").write_text(str(os.getpid()))
    assert starting_daemon(state) == os.getpid()
    (state / "daemon.lock").write_text("")
    assert starting_daemon(state) == 0
