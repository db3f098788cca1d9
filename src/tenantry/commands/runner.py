"""Run one short command as a local subprocess: argv list, cwd, env, limits.

Output streams to a sink as it arrives; the result keeps a bounded tail of
each stream. Each command runs in its own process group, so a timeout or a
kill switch ends the whole tree. Never a shell string.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import os
import resource
import signal
import subprocess
import time
import uuid
from collections.abc import Awaitable, Callable

from tenantry.commands.groupguard import Guard
from tenantry.commands.spawnlink import SpawnLink
from tenantry.core.errors import UsageError
from tenantry.core.fds import close_quietly
from tenantry.core.models import CommandResult, CommandSpec, Principal
from tenantry.service.seams import Sink

log = logging.getLogger(__name__)
# told the pid of a command and its start time once it runs (the journal records them)
OnStart = Callable[[int, int | None], Awaitable[None]]
_PR_SET_PDEATHSIG = 1
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover - no libc to load
    _LIBC = None


def proc_start_time(pid: int) -> int | None:
    """The start time of ``pid`` (clock ticks since boot; tells pid reuse apart)."""
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        stat = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    fields = stat.rpartition(b")")[2].split()
    try:
        return int(fields[19])  # field 22 of stat(5); 3 fields precede the split
    except (IndexError, ValueError):
        return None


def end_leftover(pid: int, start: int | None) -> bool:
    """End the process group of a command an earlier daemon started; True if one was.

    The group's id is the command's pid (its own session). Linux never hands
    out a pid still in use as a group id, so with the leader gone the group is
    still the command's; a live leader must have the recorded start time.
    """
    now = proc_start_time(pid)
    if now is not None and now != start:
        return False  # the pid belongs to another process now
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _die_with_daemon() -> None:
    """In the child: SIGKILL when the daemon dies (commands end with it)."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


_CHUNK = 65536
RESPAWN_S = 5.0  # a spawner that died is replaced at most this often
PIPE_GRACE_S = 2.0


class _Tail:
    """Keep the last ``cap`` bytes of a stream and whether anything was dropped."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        self.buf += data
        if len(self.buf) > self.cap:
            del self.buf[: len(self.buf) - self.cap]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.buf)

    def text(self) -> str:
        return self.buf.decode("utf-8", errors="replace")


def _limits(mem_mb: int | None, cpu_s: float | None, *, guarded: bool) -> Callable[[], None]:
    """The child's setup after fork: only what ``Popen`` cannot do without one."""

    def apply() -> None:
        if not guarded:
            _die_with_daemon()
        if mem_mb:
            size = mem_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
        if cpu_s:
            soft = int(cpu_s) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 5))

    return apply


def _not_started(cid: str, started: float, exit_code: int, reason: str) -> CommandResult:
    """A command whose program could not be started (the shell's codes: 127, 126)."""
    return CommandResult(
        id=cid,
        exit_code=exit_code,
        state="error",
        duration_s=time.monotonic() - started,
        reason=reason,
    )


class _Child:
    """A command's process, reaped by us with ``os.wait4`` for its own rusage.

    (asyncio's child watcher would reap it first and lose the rusage; the
    process-wide ``RUSAGE_CHILDREN`` mixes every concurrent command.)
    """

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.returncode: int | None = None
        self.rusage: resource.struct_rusage | None = None

    def _reap(self, flags: int) -> bool:
        try:
            pid, status, rusage = os.wait4(self.pid, flags)
        except ChildProcessError:  # reaped elsewhere: no rusage
            self.returncode = self.returncode if self.returncode is not None else -1
            return True
        if pid == 0:
            return False
        self.returncode = os.waitstatus_to_exitcode(status)
        self.popen.returncode = self.returncode
        self.rusage = rusage
        return True

    async def exited(self) -> None:
        """Wait for the process to exit (not for its pipes to close), then reap it."""
        if self.returncode is not None:
            return
        loop = asyncio.get_running_loop()
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            while not self._reap(os.WNOHANG):
                await asyncio.sleep(0.02)
            return
        done: asyncio.Future[None] = loop.create_future()

        def ready() -> None:
            if not done.done():
                done.set_result(None)

        loop.add_reader(fd, ready)
        try:
            await done
        finally:
            loop.remove_reader(fd)
            os.close(fd)
        self._reap(0)


class _Pipes:
    """A command's output pipes, read by loop callbacks (no transports, no tasks).

    Each chunk goes to the tail and the sink. While the sink is busy with a
    chunk (a slow client) its pipe is not read, so the command blocks on its
    writes instead of the daemon buffering its output. ``done`` resolves at
    end-of-file on both pipes.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        pipes: dict[str, int],
        tails: dict[str, _Tail],
        sink: Sink,
    ) -> None:
        self.loop = loop
        self.tails = tails
        self.sink = sink
        self.done: asyncio.Future[None] = loop.create_future()
        self._fds = list(pipes.values())  # the read ends; closed by close()
        self._open: dict[int, str] = {}
        self._feeding: set[asyncio.Task[None]] = set()
        for name, fd in pipes.items():
            os.set_blocking(fd, False)
            self._open[fd] = name
            loop.add_reader(fd, self._ready, fd)
        self._check_done()

    def _check_done(self) -> None:
        if not self._open and not self.done.done():
            self.done.set_result(None)

    def _ready(self, fd: int) -> None:
        try:
            data = os.read(fd, _CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        name = self._open.get(fd)
        if name is None:
            return
        if not data:
            self.loop.remove_reader(fd)
            del self._open[fd]
            self._check_done()
            return
        self.tails[name].add(data)
        self.loop.remove_reader(fd)  # until the sink took this chunk
        task = self.loop.create_task(self._feed(fd, name, data))
        self._feeding.add(task)
        task.add_done_callback(self._feeding.discard)

    async def _feed(self, fd: int, name: str, data: bytes) -> None:
        try:
            await self.sink(name, data)
        except Exception as exc:  # run() raises it from ``done``
            if not self.done.done():
                self.done.set_exception(exc)
                self.done.exception()  # retrieved, in case run() has moved on
            return
        if fd in self._open:
            self.loop.add_reader(fd, self._ready, fd)

    def close(self) -> None:
        """Stop reading and close the pipes (the command's remaining output is dropped)."""
        for fd in self._open:
            self.loop.remove_reader(fd)
        self._open.clear()
        for task in self._feeding:
            task.cancel()
        close_quietly(*self._fds)
        self._fds = []
        if not self.done.done():
            self.done.cancel()


class LocalRunner:
    """Runs commands on this host; tracks them per principal for the kill switch."""

    def __init__(
        self,
        output_cap: int = 1_048_576,
        default_timeout: float = 3600.0,
        *,
        spawner: bool = True,
    ) -> None:
        self.output_cap = output_cap
        self.default_timeout = default_timeout
        # cid -> (principal key, how to signal the command's process group)
        self._running: dict[str, tuple[str, Callable[[int], None]]] = {}
        # started by start(): commands are spawned, watched and reaped by a small
        # process of their own (commands/spawner.py), which also ends them when
        # the daemon dies; without it, here, with the group guard
        self.spawner = SpawnLink()
        self._use_spawner = spawner
        self._respawn_at = 0.0
        # ends every command's process group when the daemon dies (see groupguard);
        # without it each child sets PR_SET_PDEATHSIG itself, after a full fork
        self.guard = Guard()
        self._null: int | None = None

    def _devnull(self) -> int:
        """The commands' stdin: /dev/null, opened once."""
        if self._null is None:
            self._null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        return self._null

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        if self._use_spawner and await asyncio.to_thread(self.spawner.start, loop):
            self.spawner.attach()
            return
        if self._use_spawner:
            log.warning("cannot start the command spawner: commands spawn in the daemon")
        if not await asyncio.to_thread(self.guard.start):
            log.warning("cannot start the group guard: commands spawn with a full fork")

    async def _respawn(self) -> None:
        """A new spawner for one that died (at most every RESPAWN_S; meanwhile, and if
        it cannot start, commands spawn in the daemon)."""
        now = time.monotonic()
        if now < self._respawn_at:
            return
        self._respawn_at = now + RESPAWN_S
        dead, link = self.spawner, SpawnLink()
        await asyncio.to_thread(dead.close)  # reap the old one
        if await asyncio.to_thread(link.start, asyncio.get_running_loop()):
            link.attach()
            self.spawner = link
            log.warning("the command spawner had stopped: a new one runs")

    async def aclose(self) -> None:
        for cid in list(self._running):
            self._kill(cid)
        await asyncio.to_thread(self.spawner.close)
        await asyncio.to_thread(self.guard.close)
        if self._null is not None:
            os.close(self._null)
            self._null = None

    def running(self) -> int:
        return len(self._running)

    def _kill(self, cid: str, sig: int = signal.SIGKILL) -> None:
        entry = self._running.get(cid)
        if entry is not None:
            entry[1](sig)

    async def kill_principal(self, key: str) -> int:
        """End every command of this principal (or of every session under a user prefix)."""
        prefix = key.rstrip("/") + "/"
        victims = [c for c, (k, _) in self._running.items() if k == key or k.startswith(prefix)]
        for cid in victims:
            self._kill(cid)
        return len(victims)

    async def run(
        self,
        spec: CommandSpec,
        principal: Principal,
        sink: Sink,
        cid: str | None = None,
        on_start: OnStart | None = None,
    ) -> CommandResult:
        cid = cid or uuid.uuid4().hex[:12]
        if not os.path.isdir(spec.cwd):
            raise UsageError(
                f"working directory {spec.cwd!r} does not exist",
                hint="pass an existing directory as cwd",
            )
        if self.spawner.died:
            await self._respawn()
        if self.spawner.alive:
            return await self._run_spawned(spec, principal, sink, cid, on_start)
        timeout = spec.timeout_s or self.default_timeout
        started = time.monotonic()
        guarded = self.guard.alive
        mem_mb = spec.resources.mem_mb
        # our own pipes and /dev/null, passed as fds: Popen then makes no file
        # objects and opens nothing per command
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            try:
                # Popen, not asyncio's: we reap the child ourselves (wait4) for its
                # rusage. Without a preexec_fn (the group guard ends commands with
                # the daemon) it is a vfork+exec that returns as soon as the program
                # runs; an address-space limit still needs the child-side setup.
                popen = subprocess.Popen(  # noqa: ASYNC220
                    list(spec.argv),
                    cwd=spec.cwd,
                    env=spec.env or None,
                    stdin=self._devnull(),
                    stdout=out_w,
                    stderr=err_w,
                    start_new_session=True,
                    preexec_fn=_limits(mem_mb, None, guarded=guarded)
                    if mem_mb or not guarded
                    else None,
                )
            finally:
                os.close(out_w)
                os.close(err_w)
        except BaseException as exc:
            os.close(out_r)
            os.close(err_r)
            if isinstance(exc, FileNotFoundError):
                return _not_started(cid, started, 127, f"command not found: {spec.argv[0]}")
            if isinstance(exc, PermissionError):
                why = f"permission denied: {spec.argv[0]} is not executable"
                return _not_started(cid, started, 126, why)
            raise
        proc = _Child(popen)
        self.guard.add(popen.pid)  # its own session: the group id is its pid
        self._running[cid] = (principal.key, _group_signal(popen.pid))
        if on_start is not None:
            await on_start(popen.pid, proc_start_time(popen.pid))
        tails = {"stdout": _Tail(self.output_cap), "stderr": _Tail(self.output_cap)}
        pipes = _Pipes(
            asyncio.get_running_loop(),
            {"stdout": out_r, "stderr": err_r},
            tails,
            sink,
        )
        state = "completed"
        reason = ""
        try:
            async with asyncio.timeout(timeout):
                await proc.exited()
                try:
                    async with asyncio.timeout(PIPE_GRACE_S):
                        await asyncio.shield(pipes.done)
                except TimeoutError:
                    # background children still hold the pipes after the command
                    # exited: end them (commands are short; nothing may linger)
                    reason = "ended background processes left running by the command"
                    self._kill(cid)
                    await pipes.done
        except TimeoutError:
            state, reason = "timeout", f"killed after the {timeout:g} s timeout"
            self._kill(cid)
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                async with asyncio.timeout(5):
                    await asyncio.shield(pipes.done)
            await proc.exited()
        except asyncio.CancelledError:
            self._kill(cid)
            pipes.close()
            with contextlib.suppress(BaseException):
                await asyncio.shield(proc.exited())
            raise
        finally:
            self._running.pop(cid, None)
            if proc.returncode is not None:
                self.guard.remove(popen.pid)
            pipes.close()
        usage = proc.rusage
        cpu = (usage.ru_utime + usage.ru_stime) if usage else 0.0
        rss = int(usage.ru_maxrss) if usage else 0
        return _result(cid, proc.returncode, state, reason, started, tails, cpu, rss)

    async def _run_spawned(
        self,
        spec: CommandSpec,
        principal: Principal,
        sink: Sink,
        cid: str,
        on_start: OnStart | None,
    ) -> CommandResult:
        """``run`` through the spawner: the same steps, the process work in its process."""
        timeout = spec.timeout_s or self.default_timeout
        started = time.monotonic()
        tails = {"stdout": _Tail(self.output_cap), "stderr": _Tail(self.output_cap)}

        async def feed(stream: str, data: bytes) -> None:
            tails[stream].add(data)
            await sink(stream, data)

        mem = (spec.resources.mem_mb or 0) * 1024 * 1024
        cmd = self.spawner.run(list(spec.argv), spec.cwd, spec.env or None, mem, feed)
        try:
            pid, start_ticks = await cmd.started
        except asyncio.CancelledError:
            cmd.kill(signal.SIGKILL)  # after its start: the spawner keeps the order
            cmd.close()
            raise
        except FileNotFoundError:
            return _not_started(cid, started, 127, f"command not found: {spec.argv[0]}")
        except PermissionError:
            why = f"permission denied: {spec.argv[0]} is not executable"
            return _not_started(cid, started, 126, why)
        self._running[cid] = (principal.key, cmd.kill)
        state = "completed"
        reason = ""
        loop = asyncio.get_running_loop()

        def on_timeout() -> None:
            nonlocal state, reason
            state, reason = "timeout", f"killed after the {timeout:g} s timeout"
            cmd.kill(signal.SIGKILL)

        # one timer, not a timeout scope: the futures are the spawner's (never cancelled)
        timer = loop.call_later(timeout, on_timeout)
        try:
            if on_start is not None:
                await on_start(pid, start_ticks)
            await asyncio.shield(cmd.exited)
            if not cmd.done.done():
                await asyncio.wait((cmd.done,), timeout=PIPE_GRACE_S)
                if not cmd.done.done():
                    # background children still hold the pipes after the command
                    # exited: end them (commands are short; nothing may linger)
                    if state == "completed":
                        reason = "ended background processes left running by the command"
                    cmd.kill(signal.SIGKILL)
                    await asyncio.wait((cmd.done,), timeout=5)
            if cmd.done.done() and not cmd.done.cancelled() and cmd.done.exception():
                raise cmd.done.exception()  # type: ignore[misc]  # the sink failed
        except BaseException:
            cmd.kill(signal.SIGKILL)
            cmd.close()
            with contextlib.suppress(BaseException):
                await asyncio.shield(cmd.exited)
            raise
        finally:
            timer.cancel()
            self._running.pop(cid, None)
            cmd.close()
        utime, stime, rss = cmd.rusage
        code = cmd.exited.result()
        return _result(cid, code, state, reason, started, tails, utime + stime, rss)


def _group_signal(pgid: int) -> Callable[[int], None]:
    def send(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)

    return send


def _result(
    cid: str,
    code: int | None,
    state: str,
    reason: str,
    started: float,
    tails: dict[str, _Tail],
    cpu_s: float,
    rss_kb: int,
) -> CommandResult:
    if state == "completed":
        if code is not None and code < 0:
            state, reason = "failed", f"killed by signal {signal.Signals(-code).name}"
        elif code:
            state = "failed"
    out, err = tails["stdout"], tails["stderr"]
    return CommandResult(
        id=cid,
        exit_code=code,
        state=state,
        duration_s=time.monotonic() - started,
        where="local",
        stdout_tail=out.text(),
        stderr_tail=err.text(),
        truncated=out.truncated or err.truncated,
        reason=reason,
        # this command's own process tree (its reaped descendants included)
        cpu_s=cpu_s,
        max_rss_kb=rss_kb,
    )
