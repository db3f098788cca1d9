"""``tenantry pilot``: the worker inside a lease allocation.

It dials back to the daemon's advertised TCP address, proves it holds the
lease's key (and checks that the daemon proves it too), then runs the
commands it is sent, up to ``slots`` at once. Each command is an argv list
started in its own session (process group), so a cancel or a timeout kills
the whole tree; stdout and stderr stream back as they come; the exit
carries the code, CPU time and peak RSS from ``wait4``.

If the daemon goes away, the pilot keeps running its commands, buffers their
output and results, and redials with backoff; after a reconnect it replays
the results of commands that ended meanwhile and forgets them once acked.
Without a daemon for ``orphan_s`` it kills its commands and exits, so a lease
never outlives the daemon by more than that. Before its walltime ends (the
last ``drain_s``) it accepts nothing new and exits once idle.

Standard library only: this runs on compute nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import random
import secrets
import signal
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tenantry.core.errors import PilotProtocolError
from tenantry.core.fds import close_quietly
from tenantry.core.spawn import close_on_exec_all, ignored_signals, spawn
from tenantry.leases.pilot import protocol as p
from tenantry.leases.pilot.fdset import FdSet

log = logging.getLogger(__name__)

SECRET_ENV = "TENANTRY_LEASE_SECRET"  # noqa: S105 - a variable name, not a secret
OFFLINE_CAP = 1024 * 1024  # output bytes kept per stream while the daemon is away
KILL_GRACE_S = 2.0
SIGNAL_GRACE_S = 0.5
MAX_QUEUED = 64  # runs a pilot holds beyond its slots


@dataclass(frozen=True, slots=True)
class PilotConfig:
    host: str
    port: int
    lease: str
    secret: str = field(repr=False)
    slots: int = 1
    walltime_end: float = 0.0  # unix time; 0 = unknown (no walltime drain)
    drain_s: float = 120.0
    orphan_s: float = 180.0
    connect_timeout_s: float = 10.0


class _Rejected(Exception):
    pass


@dataclass(slots=True)
class _Offline:
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    truncated: bool = False

    def add(self, stream: str, data: bytes) -> None:
        buf = self.stdout if stream == "stdout" else self.stderr
        room = OFFLINE_CAP - len(buf)
        if len(data) > room:
            self.truncated = True
            data = data[: max(room, 0)]
        buf.extend(data)


# What Slurm gives a step on this allocation: a lease command gets these from
# the pilot's own environment over the client's (its GPUs, its job id, its CPUs)
STEP_PREFIXES = ("SLURM_", "SLURMD_")
STEP_NAMES = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "GPU_DEVICE_ORDINAL",
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "ZE_AFFINITY_MASK",
        "OMP_NUM_THREADS",
        "TMPDIR",
    }
)


def step_environment(pilot_env: Mapping[str, str]) -> dict[str, str]:
    """The allocation's step variables of the pilot's environment."""
    return {k: v for k, v in pilot_env.items() if k in STEP_NAMES or k.startswith(STEP_PREFIXES)}


class Pilot:
    _fds: FdSet  # the commands' descriptors, from the start of ``serve``

    def command_env(self, requested: Mapping[str, str]) -> dict[str, str]:
        """A command's environment: the caller's, with the allocation's step variables."""
        if not requested:
            return dict(self._env)
        return {**requested, **self._step}

    def __init__(self, cfg: PilotConfig, env: dict[str, str] | None = None) -> None:
        self.cfg = cfg
        base = dict(os.environ if env is None else env)
        base.pop(SECRET_ENV, None)  # commands never see the lease secret
        self._env = base
        self._step = step_environment(base)  # the allocation's: the same for every command
        self._null: int | None = None
        self._default_signals: tuple[int, ...] = ()  # set when it serves (core/spawn.py)
        # by id, first in first out (p.Env): each as a command gets it (command_env)
        self._envs: dict[str, dict[str, str]] = {}
        self._writer: asyncio.StreamWriter | None = None
        # each started command's end (set once it is reported, or dropped at termination)
        self._running: dict[str, asyncio.Future[None]] = {}
        # accepted but waiting for a free slot, with its environment: the daemon may
        # send a few ahead so a slot never idles for a round trip between two commands
        self._queue: dict[str, tuple[p.Run, dict[str, str]]] = {}
        self._procs: dict[str, _Proc] = {}
        self._cancelled: dict[str, str] = {}  # id -> state to report (cancelled|timeout)
        self._unacked: dict[str, p.Exit] = {}
        self._offline: dict[str, _Offline] = {}
        self._draining = False
        self._released = False
        self._terminated = False
        self._wake = asyncio.Event()
        self._heartbeat_s = 5.0
        self._online_at = time.monotonic()  # last moment a daemon was connected
        self._heard = time.monotonic()  # last message from the daemon

    # -- lifecycle ---------------------------------------------------------------------
    async def serve(self) -> int:
        """Run until released, drained at walltime, or orphaned. Returns an exit code."""
        # commands start by posix_spawn: nothing this process inherited reaches them,
        # and what it ignores they get at the default
        close_on_exec_all()
        self._default_signals = ignored_signals()
        walltimer = asyncio.create_task(self._walltime())
        loop = asyncio.get_running_loop()
        self._fds = FdSet(loop)
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_term)
        backoff = 0.05
        try:
            while True:
                if self._terminated:
                    return 143
                if self._finished():
                    return 0
                try:
                    await self._session()
                    backoff = 0.05
                except _Rejected as exc:
                    log.error("pilot rejected by the daemon: %s", exc)
                    await self._kill_all("rejected")
                    return 3
                except (TimeoutError, OSError, PilotProtocolError) as exc:
                    log.info("pilot: daemon unreachable (%s); retrying", exc)
                if self._finished():
                    return 0
                if time.monotonic() - self._online_at > self.cfg.orphan_s:
                    log.error("pilot: no daemon for %.0f s; exiting", self.cfg.orphan_s)
                    await self._kill_all("orphaned")
                    return 4
                self._wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(backoff * (1 + random.random())):
                        await self._wake.wait()
                backoff = min(backoff * 2, 2.0)
        finally:
            walltimer.cancel()
            self._fds.close()

    def _devnull(self) -> int:
        """The commands' stdin: /dev/null, opened once."""
        if self._null is None:
            self._null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        return self._null

    def _finished(self) -> bool:
        if self._terminated:
            return True
        return (
            (self._released or self._draining)
            and not self._running
            and not self._queue
            and not self._unacked
        )

    def _on_term(self) -> None:
        """SIGTERM (scancel, job end): kill every command's process tree, then exit."""
        log.info("pilot: terminated; killing %d command(s)", len(self._procs))
        self._terminated = True
        self._queue.clear()
        for proc in self._procs.values():
            _killpg(proc)
        self._settle()

    async def _walltime(self) -> None:
        if self.cfg.walltime_end <= 0:
            return
        await asyncio.sleep(max(0.0, self.cfg.walltime_end - self.cfg.drain_s - time.time()))
        log.info("pilot: walltime near; draining")
        self._draining = True
        self._send(p.Drain(reason="walltime"))
        self._refuse_queued()
        self._settle()

    async def _session(self) -> None:
        async with asyncio.timeout(self.cfg.connect_timeout_s):
            reader, writer = await asyncio.open_connection(
                self.cfg.host, self.cfg.port, limit=p.MAX_LINE + 1
            )
        try:
            nonce = secrets.token_hex(16)
            hello = p.Hello(
                lease=self.cfg.lease,
                nonce=nonce,
                slots=self.cfg.slots,
                walltime_end=self.cfg.walltime_end,
                host=socket.gethostname(),
                pid=os.getpid(),
                running=(*self._running, *self._queue),
                finished=tuple(self._unacked),
                draining=self._draining,
            )
            p.send(writer, hello)
            await writer.drain()
            async with asyncio.timeout(self.cfg.connect_timeout_s):
                first = await p.recv(reader)
            if isinstance(first, p.Reject):
                raise _Rejected(first.reason)
            if not isinstance(first, p.Welcome):
                raise PilotProtocolError(f"expected welcome, got {type(first).__name__}")
            key = p.key_of(self.cfg.secret)
            if not p.check(key, "daemon", self.cfg.lease, nonce, first.nonce, first.proof):
                # not our daemon (or not our secret): never take work from it
                raise PilotProtocolError("the daemon did not prove the lease key")
            p.send(writer, p.Auth(proof=p.proof(key, "pilot", self.cfg.lease, first.nonce, nonce)))
            p.seal(
                reader, writer, key, me="pilot", lease=self.cfg.lease,
                pilot_nonce=nonce, daemon_nonce=first.nonce,
            )  # fmt: skip
            self._heartbeat_s = first.heartbeat_s
            self._heard = time.monotonic()
            self._writer = writer
            self._replay(writer)
            await writer.drain()
            beat = asyncio.create_task(self._beat(writer))
            try:
                await self._loop(reader)
            finally:
                beat.cancel()
        finally:
            p.unseal(reader, writer)
            if self._writer is not None:
                self._online_at = time.monotonic()
            self._writer = None
            writer.close()
            with contextlib.suppress(OSError, asyncio.CancelledError):
                await writer.wait_closed()

    def _replay(self, writer: asyncio.StreamWriter) -> None:
        results = []
        for cid, ex in self._unacked.items():
            off = self._offline.pop(cid, None)
            if off is not None:
                ex = dataclasses.replace(
                    ex, stdout=bytes(off.stdout), stderr=bytes(off.stderr), truncated=off.truncated
                )
                self._unacked[cid] = ex
            results.append(ex)
        if results:
            p.send(writer, p.Replay(results=tuple(results)))
        for cid, off in list(self._offline.items()):
            if cid in self._running:
                for stream, buf in (("stdout", off.stdout), ("stderr", off.stderr)):
                    if buf:
                        p.send(writer, p.Output(id=cid, stream=stream, data=bytes(buf)))
                del self._offline[cid]

    async def _beat(self, writer: asyncio.StreamWriter) -> None:
        silence = max(4 * self._heartbeat_s, 1.0)
        while not writer.is_closing():
            await asyncio.sleep(self._heartbeat_s)
            if time.monotonic() - self._heard > silence:
                log.info("pilot: daemon silent for %.0f s; redialling", silence)
                writer.close()  # the reader sees end of stream
                return
            p.send(writer, p.Heartbeat(ts=time.time(), running=len(self._running)))
            try:
                await writer.drain()
            except ConnectionError:
                return

    async def _loop(self, reader: asyncio.StreamReader) -> None:
        self._settle()
        while True:
            try:
                msg = await p.recv(reader)
            except PilotProtocolError as exc:
                cid = exc.details.get("command_id")
                if not isinstance(cid, str):
                    raise
                # a command it cannot run: fail that command, keep the link
                self._heard = time.monotonic()
                self._finish(
                    p.Exit(
                        id=cid,
                        state="error",
                        code=None,
                        reason=f"the pilot cannot run this command: {exc.message}",
                    )
                )
                continue
            if msg is None:
                return
            self._heard = time.monotonic()
            self._handle(msg)
            self._settle()

    def _settle(self) -> None:
        """Close the link once nothing is left to do (released or drained, all acked)."""
        self._wake.set()
        if self._finished() and self._writer is not None:
            p.flush(self._writer)
            self._writer.close()

    def _handle(self, msg: p.Message) -> None:
        if isinstance(msg, p.Run):
            self._start(msg)
        elif isinstance(msg, p.Env):
            self._envs.pop(msg.id, None)  # sent again: now the newest, as on the daemon
            self._envs[msg.id] = self.command_env(msg.env)
            while len(self._envs) > p.ENVS_KEPT:
                del self._envs[next(iter(self._envs))]
        elif isinstance(msg, p.Cancel):
            queued = self._queue.pop(msg.id, None)
            if queued is not None:
                self._finish(p.Exit(id=msg.id, state="cancelled", code=None, reason="cancelled"))
            self._kill(msg.id, "cancelled")
        elif isinstance(msg, p.Ack):
            for cid in msg.ids:
                self._unacked.pop(cid, None)
                self._offline.pop(cid, None)
        elif isinstance(msg, p.Drain):
            self._draining = True
            self._refuse_queued()
        elif isinstance(msg, p.Release):
            self._released = True
            self._refuse_queued()
        elif isinstance(msg, p.Reject):
            raise _Rejected(msg.reason)
        elif not isinstance(msg, p.Heartbeat):
            raise PilotProtocolError(f"unexpected {msg.t} message from the daemon")

    # -- commands ---------------------------------------------------------------------
    def _send(self, msg: p.Message) -> bool:
        w = self._writer
        if w is None or w.is_closing():
            return False
        p.send(w, msg)
        return True

    def _start(self, run: p.Run) -> None:
        if run.id in self._running or run.id in self._queue:
            return
        if run.id in self._unacked:
            self._send(self._unacked[run.id])
            return
        if self._draining or self._released or len(self._queue) >= MAX_QUEUED:
            why = "pilot is draining" if self._draining or self._released else "pilot is full"
            self._send(p.Exit(id=run.id, state="refused", code=None, reason=why))
            return
        if run.env_id:
            env = self._envs.get(run.env_id)
            if env is None:
                why = "unknown environment id (the daemon sends each environment first)"
                self._send(p.Exit(id=run.id, state="error", code=None, reason=why))
                return
        else:
            env = self.command_env(run.env)
        if len(self._running) < self.cfg.slots:
            self._execute(run, env)
        else:
            self._queue[run.id] = (run, env)

    def _next(self) -> None:
        while self._queue and len(self._running) < self.cfg.slots:
            cid = next(iter(self._queue))
            self._execute(*self._queue.pop(cid))

    def _refuse_queued(self) -> None:
        """Draining: hand back what never started (the daemon sends it elsewhere)."""
        for cid in list(self._queue):
            del self._queue[cid]
            self._send(p.Exit(id=cid, state="refused", code=None, reason="pilot is draining"))

    def _finish(self, ex: p.Exit) -> None:
        self._unacked[ex.id] = ex
        self._send(ex)
        self._settle()

    def _on_output(self, cid: str, stream: str, data: bytes) -> None:
        if not self._send(p.Output(id=cid, stream=stream, data=data)):
            self._offline.setdefault(cid, _Offline()).add(stream, data)

    # A started command is carried to its end by loop callbacks, not a task: its
    # pipes' readers forward its output, its pidfd says when it exits (then wait4
    # gives the status and rusage, and what it left in its group is killed), and
    # it is reported once both pipes are at end of file (or KILL_GRACE_S after
    # the exit, when something it started keeps them open).
    def _execute(self, run: p.Run, env: dict[str, str]) -> None:
        loop = asyncio.get_running_loop()
        c = _Running(run, loop.create_future())
        self._running[run.id] = c.done
        try:
            self._spawn(c, env, loop)
        except Exception as exc:  # report, never die silently
            self._broken(c, exc)

    def _spawn(self, c: _Running, env: dict[str, str], loop: asyncio.AbstractEventLoop) -> None:
        run = c.run
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            # posix_spawn, not asyncio's subprocess: we reap with wait4 to get the
            # command's rusage; its pipes are plain fds read by loop callbacks
            pid = spawn(
                run.argv,
                run.cwd,
                env,
                stdin=self._devnull(),
                stdout=out_w,
                stderr=err_w,
                default_signals=self._default_signals,
            )
        except OSError as exc:
            close_quietly(out_r, err_r)
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            where = exc.filename or run.argv[0]
            self._ended(c, p.Exit(
                id=run.id, state="failed", code=code, duration_s=time.monotonic() - c.started,
                reason=f"cannot run {run.argv[0]!r}: {exc.strerror} ({where})",
            ))  # fmt: skip
            return
        except BaseException:
            close_quietly(out_r, err_r)
            raise
        finally:
            close_quietly(out_w, err_w)
        c.proc = _Proc(pid)
        self._procs[run.id] = c.proc
        c.pipes = {out_r: "stdout", err_r: "stderr"}
        for fd in c.pipes:
            os.set_blocking(fd, False)
            self._fds.add_reader(fd, self._readable, c, fd, loop)
        try:
            c.pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):  # no pidfd: a thread waits for the exit
            waiter = loop.run_in_executor(None, _blocking_wait4, pid)
            waiter.add_done_callback(lambda f: self._waited(c, f, loop))
        else:
            self._fds.add_reader(c.pidfd, self._exited, c, loop)
        if run.timeout_s:
            c.timer = loop.call_later(run.timeout_s, self._kill, run.id, "timeout")

    def _readable(self, c: _Running, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        try:
            data = os.read(fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._on_output(c.run.id, c.pipes[fd], data)
            return
        self._fds.remove_reader(fd)
        del c.pipes[fd]
        os.close(fd)
        if not c.pipes and c.rusage is not None:  # reaped already
            self._complete(c, loop)

    def _exited(self, c: _Running, loop: asyncio.AbstractEventLoop) -> None:
        assert c.pidfd is not None and c.proc is not None
        self._fds.remove_reader(c.pidfd)
        os.close(c.pidfd)
        c.pidfd = None
        try:
            _, status, ru = os.wait4(c.proc.pid, 0)
        except Exception as exc:
            self._broken(c, exc)
            return
        self._reaped(c, status, ru, loop=loop)

    def _waited(
        self, c: _Running, f: asyncio.Future[tuple[int, Any]], loop: asyncio.AbstractEventLoop
    ) -> None:
        try:
            status, ru = f.result()
        except Exception as exc:
            self._broken(c, exc)
            return
        self._reaped(c, status, ru, loop=loop)

    def _reaped(
        self, c: _Running, status: int, ru: Any, *, loop: asyncio.AbstractEventLoop
    ) -> None:
        assert c.proc is not None
        c.rusage = ru
        c.proc.returncode = os.waitstatus_to_exitcode(status)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(c.proc.pid, signal.SIGKILL)  # leftovers of the command's tree
        if c.pipes:  # something it started holds them: a moment to let go, then closed
            c.grace = loop.call_later(KILL_GRACE_S, self._complete, c, loop)
        else:
            self._complete(c, loop)

    def _complete(self, c: _Running, loop: asyncio.AbstractEventLoop) -> None:
        """The command is reaped and its pipes are done (or given up on): report it."""
        if c.done.done():
            return
        self._release(c)
        assert c.proc is not None and c.proc.returncode is not None
        code = c.proc.returncode
        run = c.run
        state = self._cancelled.pop(run.id, None) or ("completed" if code == 0 else "failed")
        ru = c.rusage
        ex = p.Exit(
            id=run.id,
            state=state,
            code=code,
            cpu_s=round(ru.ru_utime + ru.ru_stime, 6),
            max_rss_kb=int(ru.ru_maxrss),
            duration_s=round(time.monotonic() - c.started, 6),
            reason=f"timed out after {run.timeout_s} s" if state == "timeout" else "",
        )
        if code < 0 and state == "failed" and not self._terminated:
            # Killed by a signal we did not send: often the allocation is being torn down
            # (scancel, walltime), which signals every process of the job at once. Wait a
            # moment; if the pilot is terminated too, the daemon reports "lease lost".
            c.grace = loop.call_later(SIGNAL_GRACE_S, self._ended, c, ex)
            return
        self._ended(c, ex)

    def _release(self, c: _Running) -> None:
        """Its timer, its grace and whatever pipe is still open."""
        for handle in (c.timer, c.grace):
            if handle is not None:
                handle.cancel()
        c.timer = c.grace = None
        for fd in c.pipes:
            self._fds.remove_reader(fd)
            os.close(fd)
        c.pipes = {}

    def _broken(self, c: _Running, exc: Exception) -> None:
        log.error("pilot: command %s failed to run", c.run.id, exc_info=exc)
        self._release(c)
        if c.pidfd is not None:
            self._fds.remove_reader(c.pidfd)
            close_quietly(c.pidfd)
            c.pidfd = None
        if c.proc is not None and c.proc.returncode is None:
            _killpg(c.proc)
        self._ended(c, p.Exit(id=c.run.id, state="error", code=None, reason=f"pilot error: {exc}"))

    def _ended(self, c: _Running, ex: p.Exit) -> None:
        """Its slot is free; its exit is reported, unless the pilot goes down with its
        allocation (then nothing more is)."""
        if c.done.done():
            return
        c.done.set_result(None)
        self._procs.pop(c.run.id, None)
        self._running.pop(c.run.id, None)
        if self._terminated:
            return
        self._next()
        self._finish(ex)

    def _kill(self, cid: str, why: str) -> None:
        proc = self._procs.get(cid)
        if proc is None or proc.returncode is not None:
            return
        self._cancelled.setdefault(cid, why)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        asyncio.get_running_loop().call_later(KILL_GRACE_S, _killpg, proc)

    async def _kill_all(self, why: str) -> None:
        for cid in list(self._procs):
            self._kill(cid, "cancelled")
        if self._running:
            await asyncio.wait(list(self._running.values()), timeout=KILL_GRACE_S * 2)


class _Running:
    """A command between its start and its report (see ``Pilot._execute``)."""

    __slots__ = ("done", "grace", "pidfd", "pipes", "proc", "run", "rusage", "started", "timer")

    def __init__(self, run: p.Run, done: asyncio.Future[None]) -> None:
        self.run = run
        self.done = done
        self.started = time.monotonic()
        self.proc: _Proc | None = None
        self.pipes: dict[int, str] = {}
        self.pidfd: int | None = None
        self.rusage: Any = None  # wait4's, once reaped
        self.timer: asyncio.TimerHandle | None = None
        self.grace: asyncio.TimerHandle | None = None


class _Proc:
    """A command the pilot started: its pid, and its exit code once reaped."""

    __slots__ = ("pid", "returncode")

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None


def _killpg(proc: _Proc) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)


def _blocking_wait4(pid: int) -> tuple[int, Any]:
    _, status, ru = os.wait4(pid, 0)
    return status, ru


def walltime_end(walltime_s: float, env: dict[str, str] | None = None) -> float:
    """When the allocation ends: Slurm's ``SLURM_JOB_END_TIME`` if set, else now + walltime."""
    env = dict(os.environ) if env is None else env
    raw = env.get("SLURM_JOB_END_TIME", "")
    if raw.isdigit() and int(raw) > 0:
        return float(raw)
    return time.time() + walltime_s if walltime_s > 0 else 0.0


def run_pilot(cfg: PilotConfig) -> int:
    return asyncio.run(Pilot(cfg).serve())
