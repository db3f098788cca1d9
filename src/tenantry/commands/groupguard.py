"""Commands end with the daemon: a small watcher process that outlives it by a moment.

The daemon starts one guard per runner and tells it, over a pipe, the process
group of every command it spawns (``+PGID``) and of every command it reaped
(``-PGID``). When the daemon dies -- however it dies, SIGKILL included -- the
pipe's write end closes, the guard reads end-of-file and sends SIGKILL to every
group still registered, then exits. So the daemon can spawn commands with a
plain ``vfork``-able ``subprocess.Popen`` (no ``preexec_fn`` running Python in
a forked copy of the big daemon, which costs milliseconds per command) and
still ends them, and their whole process group, the moment it dies.

Run as ``python -m tenantry.commands.groupguard``; it imports only the standard library
(and ``tenantry.core.fds``).
The write end is close-on-exec in the daemon and ``close_fds`` keeps it out of
commands, so only the daemon holds it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys

from tenantry.core.fds import close_quietly


def watch(fd: int) -> int:
    """Read ``+PGID``/``-PGID`` lines from ``fd`` until EOF; then end what is left."""
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            data = os.read(fd, 65536)
        except InterruptedError:  # pragma: no cover - PEP 475 retries
            continue
        if not data:
            break
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if len(line) < 2 or not line[1:].isdigit():
                continue
            pgid = int(line[1:])
            if line[:1] == b"+":
                groups.add(pgid)
            else:
                groups.discard(pgid)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)
    return 0


class Guard:
    """The daemon's side: start the watcher, then ``add``/``remove`` process groups."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = None
        self._wfd: int | None = None

    @property
    def alive(self) -> bool:
        return self._wfd is not None

    def start(self) -> bool:
        """Start the watcher; False when it cannot run (the caller falls back)."""
        rfd, wfd = os.pipe()  # both close-on-exec (PEP 446)
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-S", "-m", __name__],
                stdin=rfd,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to the daemon's terminal is not for it
                env={**os.environ, "PYTHONPATH": python_path()},
            )
        except OSError:
            os.close(wfd)
            return False
        finally:
            os.close(rfd)
        self._wfd = wfd
        return True

    def _send(self, line: bytes) -> None:
        if self._wfd is None:
            return
        try:
            os.write(self._wfd, line)
        except OSError:  # the watcher is gone: commands still end on the next start
            self._close_fd()

    def add(self, pgid: int) -> None:
        self._send(b"+%d\n" % pgid)

    def remove(self, pgid: int) -> None:
        self._send(b"-%d\n" % pgid)

    def _close_fd(self) -> None:
        close_quietly(self._wfd)
        self._wfd = None

    def close(self) -> None:
        """End the watcher (the groups it still knows are ended with it)."""
        self._close_fd()
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            self._proc = None


def python_path() -> str:
    """``PYTHONPATH`` with the directory holding the ``tenantry`` package first.

    (``-S`` skips site-packages: the guard starts in a few milliseconds.)
    """
    root = os.path.abspath(__file__)
    for _ in __name__.split("."):
        root = os.path.dirname(root)
    rest = os.environ.get("PYTHONPATH", "")
    return root + (os.pathsep + rest if rest else "")


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(watch(sys.stdin.fileno()))
