"""The daemon's end of the spawner (``commands/spawner.py``): requests out, events in.

Requests are queued and written once per turn of the event loop, events are
read by one loop callback on the socket; so a burst of commands costs the
loop a few writes and reads, not a vfork, three registrations and a reap
each. A command is a ``Remote``: its pid (once it runs), its exit status and
rusage, and its output handed to a callback, which says when it took a chunk
(backpressure: the spawner reads that pipe again only then).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from tenantry.commands.groupguard import python_path

log = logging.getLogger(__name__)

STREAMS = {1: "stdout", 2: "stderr"}
ENVS_KEPT = 64  # distinct environments the spawner holds (least recently used dropped)

# told each chunk of output (stream name, bytes); returns once the chunk is taken
Feed = Callable[[str, bytes], Awaitable[None]]


class SpawnerGone(OSError):
    """The spawner process ended (its commands were ended with it)."""


class Remote:
    """One command run by the spawner."""

    __slots__ = (
        "closed",
        "done",
        "exited",
        "feed",
        "feeding",
        "link",
        "n",
        "open",
        "pid",
        "rusage",
        "started",
    )

    def __init__(self, link: SpawnLink, n: int, feed: Feed) -> None:
        loop = link.loop
        self.link = link
        self.n = n
        self.feed = feed
        self.pid = 0
        self.started: asyncio.Future[tuple[int, int | None]] = loop.create_future()
        self.exited: asyncio.Future[int] = loop.create_future()
        self.rusage: tuple[float, float, int] = (0.0, 0.0, 0)
        self.open = {1, 2}  # streams whose pipe has not reached end-of-file
        self.feeding: set[asyncio.Task[None]] = set()
        self.closed = False
        self.done: asyncio.Future[None] = loop.create_future()

    def kill(self, sig: int) -> None:
        if not self.exited.done() or self.open:
            self.link.send(["kill", self.n, sig])

    def _closed(self, stream: int) -> None:
        self.open.discard(stream)
        self._check()

    def _check(self) -> None:
        if not self.open and self.exited.done() and not self.done.done():
            self.done.set_result(None)

    def close(self) -> None:
        """Stop feeding output (the rest is read and dropped)."""
        self.closed = True
        for task in self.feeding:
            task.cancel()
        if not self.done.done():
            self.done.cancel()

    async def _take(self, stream: int, data: bytes) -> None:
        try:
            await self.feed(STREAMS[stream], data)
        except Exception as exc:  # the runner raises it from ``done``
            if not self.done.done():
                self.done.set_exception(exc)
                self.done.exception()
            return
        self.link.send(["more", self.n, stream])

    def _fail(self, exc: BaseException) -> None:
        for fut in (self.started, self.exited, self.done):
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()


class SpawnLink:
    """Start the spawner, send it commands, dispatch what it reports."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._out: list[bytes] = []
        self._flush_soon = False
        self._writing = False
        self._pending = b""
        self._ids = 0
        self._cmds: dict[int, Remote] = {}
        self._envs: OrderedDict[tuple[tuple[str, str], ...], int] = OrderedDict()
        self.died = False  # it ran and stopped by itself (not closed by us)

    @property
    def alive(self) -> bool:
        return self._sock is not None

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Start the spawner (blocking: call it off the loop); False if it cannot run."""
        mine, theirs = socket.socketpair()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-S", "-m", "tenantry.commands.spawner"],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to the daemon's terminal is not for it
                env={**os.environ, "PYTHONPATH": python_path()},
            )
        except OSError:
            mine.close()
            return False
        finally:
            theirs.close()
        mine.setblocking(False)
        self.loop = loop
        self._sock = mine
        # a command sent without an environment gets the daemon's (not the spawner's);
        # queued here (off the loop), written by attach()
        self._out.append(json.dumps(["env", 0, dict(os.environ)]).encode() + b"\n")
        return True

    def attach(self) -> None:
        """Start reading the spawner's events (on the loop); send what start() queued."""
        if self._sock is not None:
            self.loop.add_reader(self._sock.fileno(), self._readable)
            self._flush_soon = True
            self.loop.call_soon(self._flush)

    # -- requests ------------------------------------------------------------------------

    def send(self, msg: list[Any]) -> None:
        if self._sock is None:
            return
        self._out.append(json.dumps(msg, separators=(",", ":")).encode() + b"\n")
        if not self._flush_soon and not self._writing:
            self._flush_soon = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_soon = False
        sock = self._sock
        if sock is None or not self._out:
            return
        data = b"".join(self._out)
        self._out.clear()
        try:
            sent = sock.send(data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            self._gone(exc)
            return
        if sent < len(data):  # the spawner is busy: the rest when it can take it
            self._out.append(data[sent:])
            if not self._writing:
                self._writing = True
                self.loop.add_writer(sock.fileno(), self._writable)

    def _writable(self) -> None:
        self._writing = False
        if self._sock is not None:
            self.loop.remove_writer(self._sock.fileno())
        self._flush()

    def _env_id(self, env: dict[str, str] | None) -> int:
        if env is None:
            return 0
        key = tuple(env.items())
        n = self._envs.get(key)
        if n is not None:
            self._envs.move_to_end(key)
            return n
        self._ids += 1
        n = self._envs[key] = self._ids
        self.send(["env", n, env])
        if len(self._envs) > ENVS_KEPT:
            _, old = self._envs.popitem(last=False)
            self.send(["forget-env", old])
        return n

    def run(
        self, argv: list[str], cwd: str, env: dict[str, str] | None, mem: int, feed: Feed
    ) -> Remote:
        if self._sock is None:
            raise SpawnerGone("the spawner is not running")
        env_id = self._env_id(env)
        self._ids += 1
        cmd = Remote(self, self._ids, feed)
        self._cmds[cmd.n] = cmd
        self.send(["run", cmd.n, argv, cwd, env_id, mem])
        return cmd

    # -- events --------------------------------------------------------------------------

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        try:
            data = sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError as exc:
            self._gone(exc)
            return
        if not data:
            self._gone(SpawnerGone("the spawner ended"))
            return
        *lines, self._pending = (self._pending + data).split(b"\n")
        for line in lines:
            self._event(json.loads(line))

    def _event(self, msg: list[Any]) -> None:
        kind, n = msg[0], msg[1]
        cmd = self._cmds.get(n)
        if cmd is None:
            return
        if kind == "pid":
            cmd.pid = msg[2]
            cmd.started.set_result((msg[2], msg[3]))
        elif kind == "out":
            if cmd.closed:
                self.send(["more", n, msg[2]])
                return
            task = self.loop.create_task(cmd._take(msg[2], base64.b64decode(msg[3])))
            cmd.feeding.add(task)
            task.add_done_callback(cmd.feeding.discard)
        elif kind == "exit":
            cmd.rusage = (msg[3], msg[4], msg[5])
            cmd.open.intersection_update(msg[6])
            cmd.exited.set_result(msg[2])
            cmd._check()
        elif kind == "eof":
            cmd._closed(msg[2])
        elif kind == "err":
            del self._cmds[n]
            cmd.started.set_exception(_spawn_error(msg[2], msg[3]))
            cmd.started.exception()
        if cmd.exited.done() and not cmd.open:
            self._cmds.pop(n, None)

    def _gone(self, exc: BaseException) -> None:
        if self._sock is None:
            return
        log.error("the command spawner stopped: %s", exc)
        self.died = True
        self.loop.remove_reader(self._sock.fileno())
        if self._writing:
            self.loop.remove_writer(self._sock.fileno())
        self._sock.close()
        self._sock = None
        err = SpawnerGone(f"the command spawner stopped ({exc})")
        for cmd in self._cmds.values():
            if cmd.pid and not cmd.exited.done():  # nobody watches it any more: end it
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(cmd.pid, signal.SIGKILL)
            cmd._fail(err)
        self._cmds.clear()

    def close(self) -> None:
        """End the spawner (the commands it still runs are ended with it); blocking."""
        if self._sock is not None:
            with contextlib.suppress(Exception):
                self.loop.remove_reader(self._sock.fileno())
                if self._writing:
                    self.loop.remove_writer(self._sock.fileno())
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)
            self._proc = None


def _spawn_error(code: int, message: str) -> OSError:
    """The spawner's report as the ``OSError`` ``Popen`` would have raised."""
    if code:
        return OSError(code, message)
    return OSError(message)
