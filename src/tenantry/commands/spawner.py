"""The spawner: a small process that starts, watches and reaps the daemon's commands.

The daemon sends it requests and it answers over one socket pair, one JSON
array per line, many lines per write (each side writes what it has once per
turn of its loop). So the vfork and exec of every command, its pipes, its
exit and its reaping run on the second core, outside the daemon's event
loop and its lock::

    daemon -> spawner   ["env", E, {name: value}]          an environment, sent once
                        ["run", N, argv, cwd, E, mem_bytes]  (E = 0: the daemon's own)
                        ["kill", N, signal]                  to the command's process group
                        ["more", N, stream]                  the daemon took a chunk: read on
    spawner -> daemon   ["pid", N, pid, start_ticks]
                        ["err", N, errno, message]           the program did not start
                        ["out", N, stream, base64]           at most one unread chunk per stream
                        ["exit", N, code, utime, stime, maxrss_kb, open_streams]
                        ["eof", N, stream]                   a stream still open at exit closed

``stream`` is 1 (stdout) or 2 (stderr). A command is forgotten once it has
exited and both its pipes are closed. It is also the group guard
(``commands/groupguard.py``): when the daemon's end closes, however the
daemon died, every command's process group still known gets SIGKILL and the
spawner exits.

Run as ``python -S -m tenantry.commands.spawner`` with the socket as its
stdin; it imports only the standard library.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import resource
import select
import signal
import socket
import subprocess
import sys
from typing import Any

from tenantry.core.spawn import ignored_signals, spawn

CHUNK = 65536


def start_ticks(pid: int) -> int | None:
    """The start time of ``pid`` in clock ticks since boot (tells pid reuse apart)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rpartition(b")")[2].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


# signals a command starts with at their default disposition: every one this
# process ignores (Python ignores SIGPIPE and SIGXFSZ, the spawner SIGINT, and
# what the daemon's parent ignored); set by main()
_DEFAULT_SIGNALS: tuple[int, ...] = ()


def _rlimit_as(size: int) -> Any:
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (size, size))

    return apply


class _Command:
    __slots__ = ("exited", "fds", "n", "pid", "pidfd")

    def __init__(self, n: int, pid: int, out: int, err: int) -> None:
        self.n = n
        self.pid = pid
        self.fds = {out: 1, err: 2}  # the open read ends
        self.pidfd = -1
        self.exited = False


class Spawner:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.ep = select.epoll()
        self.envs: dict[int, dict[str, str]] = {}
        self.by_id: dict[int, _Command] = {}
        self.by_fd: dict[int, _Command] = {}  # pipes and pidfds
        self.out: list[bytes] = []
        self.pending = b""
        self.null = os.open(os.devnull, os.O_RDONLY)

    def send(self, *msg: Any) -> None:
        self.out.append(json.dumps(msg, separators=(",", ":")).encode() + b"\n")

    def flush(self) -> None:
        if self.out:
            data, self.out = b"".join(self.out), []
            self.sock.sendall(data)  # the daemon reads on its loop: it drains us

    def run(self, n: int, argv: list[str], cwd: str, env_id: int, mem: int) -> None:
        env = self.envs.get(env_id)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            if mem:  # an address-space limit needs the child-side setup (a fork)
                pid = subprocess.Popen(
                    argv,
                    cwd=cwd,
                    env=env,
                    stdin=self.null,
                    stdout=out_w,
                    stderr=err_w,
                    start_new_session=True,
                    preexec_fn=_rlimit_as(mem),
                ).pid
            else:
                pid = self.spawn(argv, cwd, env, out_w, err_w)
        except OSError as exc:
            os.close(out_r)
            os.close(err_r)
            self.send("err", n, exc.errno or 0, exc.strerror or str(exc))
            return
        except Exception as exc:  # e.g. a NUL byte the daemon let through
            os.close(out_r)
            os.close(err_r)
            self.send("err", n, 0, str(exc))
            return
        finally:
            os.close(out_w)
            os.close(err_w)
        cmd = _Command(n, pid, out_r, err_r)
        self.by_id[n] = cmd
        for fd in (out_r, err_r):
            os.set_blocking(fd, False)
            self.by_fd[fd] = cmd
            self.ep.register(fd, select.EPOLLIN)
        cmd.pidfd = os.pidfd_open(cmd.pid)
        self.by_fd[cmd.pidfd] = cmd
        self.ep.register(cmd.pidfd, select.EPOLLIN)
        self.send("pid", n, cmd.pid, start_ticks(cmd.pid))
        # the daemon learns a pid before this process does anything else: if it is
        # killed now, the daemon still knows which process group to end
        self.flush()

    def spawn(
        self, argv: list[str], cwd: str, env: dict[str, str] | None, out: int, err: int
    ) -> int:
        """``posix_spawn`` the program in ``cwd`` in a new session (``core/spawn.py``;
        this process is single-threaded and every descriptor of it close-on-exec)."""
        return spawn(
            argv,
            cwd,
            os.environ if env is None else env,
            stdin=self.null,
            stdout=out,
            stderr=err,
            default_signals=_DEFAULT_SIGNALS,
        )

    def readable(self, fd: int) -> None:
        cmd = self.by_fd.get(fd)
        if cmd is None:
            return
        if fd == cmd.pidfd:
            self.reap(cmd)
            return
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self.ep.unregister(fd)  # until the daemon took this chunk ("more")
            self.send("out", cmd.n, cmd.fds[fd], base64.b64encode(data).decode())
            return
        stream = cmd.fds.pop(fd)
        self.close_fd(fd)
        if cmd.exited:
            self.send("eof", cmd.n, stream)
        self.settle(cmd)

    def reap(self, cmd: _Command) -> None:
        try:
            _, status, ru = os.wait4(cmd.pid, 0)
            code = os.waitstatus_to_exitcode(status)
            usage = [ru.ru_utime, ru.ru_stime, ru.ru_maxrss]
        except ChildProcessError:  # pragma: no cover - only we reap our children
            code, usage = -1, [0.0, 0.0, 0]
        self.close_fd(cmd.pidfd)
        cmd.pidfd = -1
        cmd.exited = True
        self.send("exit", cmd.n, code, *usage, sorted(cmd.fds.values()))
        self.settle(cmd)

    def close_fd(self, fd: int) -> None:
        self.by_fd.pop(fd, None)
        with contextlib.suppress(OSError):
            self.ep.unregister(fd)
        os.close(fd)

    def settle(self, cmd: _Command) -> None:
        if cmd.exited and not cmd.fds:
            self.by_id.pop(cmd.n, None)

    def more(self, n: int, stream: int) -> None:
        cmd = self.by_id.get(n)
        if cmd is None:
            return
        for fd, s in cmd.fds.items():
            if s == stream:
                with contextlib.suppress(OSError):  # already registered
                    self.ep.register(fd, select.EPOLLIN)

    def kill(self, n: int, sig: int) -> None:
        cmd = self.by_id.get(n)
        if cmd is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(cmd.pid, sig)

    def handle(self, msg: list[Any]) -> None:
        kind = msg[0]
        if kind == "run":
            self.run(msg[1], msg[2], msg[3], msg[4], msg[5])
        elif kind == "env":
            self.envs[msg[1]] = msg[2]
        elif kind == "more":
            self.more(msg[1], msg[2])
        elif kind == "kill":
            self.kill(msg[1], msg[2])
        elif kind == "forget-env":
            self.envs.pop(msg[1], None)

    def requests(self) -> bool:
        """Handle what the daemon sent; False at end-of-file (the daemon is gone)."""
        try:
            data = self.sock.recv(1 << 20)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        if not data:
            return False
        *lines, self.pending = (self.pending + data).split(b"\n")
        for line in lines:
            if line:
                self.handle(json.loads(line))
        return True

    def serve(self) -> None:
        me = self.sock.fileno()
        self.sock.setblocking(False)
        self.ep.register(me, select.EPOLLIN)
        while True:
            try:
                events = self.ep.poll()
            except InterruptedError:  # pragma: no cover - PEP 475 retries
                continue
            # the daemon's requests last: a command's pipes are read before its exit is seen
            events.sort(key=lambda e: e[0] == me)
            for fd, _ in events:
                if fd == me:
                    if not self.requests():
                        return
                else:
                    self.readable(fd)
            self.sock.setblocking(True)
            try:
                self.flush()
            except OSError:
                return
            finally:
                self.sock.setblocking(False)

    def end_all(self) -> None:
        """The daemon is gone: end every command's process group still known."""
        for cmd in self.by_id.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(cmd.pid, signal.SIGKILL)


def main() -> int:
    global _DEFAULT_SIGNALS
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C to the daemon's terminal
    _DEFAULT_SIGNALS = ignored_signals()
    sock = socket.socket(fileno=sys.stdin.fileno())
    spawner = Spawner(sock)
    try:
        spawner.serve()
    finally:
        spawner.end_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
