"""Run one short command as a local subprocess: argv list, cwd, env, limits.

Output streams to a sink as it arrives; the result keeps a bounded tail of
each stream. Each command runs in its own process group, so a timeout or a
kill switch ends the whole tree. Never a shell string.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

from tenantry.errors import UsageError
from tenantry.models import CommandResult, CommandSpec, Principal

Sink = Callable[[str, bytes], Awaitable[None]]

_CHUNK = 65536
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


def _limits(mem_mb: int | None, cpu_s: float | None) -> Callable[[], None]:
    def apply() -> None:
        if mem_mb:
            size = mem_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (size, size))
        if cpu_s:
            soft = int(cpu_s) + 1
            resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 5))

    return apply


async def _exited(proc: asyncio.subprocess.Process) -> None:
    """Wait for the process itself to exit, not for its pipes to close.

    (asyncio's ``Process.wait`` also waits until every pipe is closed, which a
    background child can hold open forever.) Uses a pidfd where Linux has one.
    """
    if proc.returncode is not None:
        return
    try:
        fd = os.pidfd_open(proc.pid)
    except ProcessLookupError:
        return  # already exited (and reaped by asyncio's child watcher)
    except (AttributeError, OSError):
        await proc.wait()
        return
    if proc.returncode is not None:  # reaped meanwhile: the pid may be someone else's
        os.close(fd)
        return
    loop = asyncio.get_running_loop()
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


class LocalRunner:
    """Runs commands on this host; tracks them per principal for the kill switch."""

    def __init__(self, output_cap: int = 1_048_576, default_timeout: float = 3600.0) -> None:
        self.output_cap = output_cap
        self.default_timeout = default_timeout
        self._running: dict[str, tuple[str, asyncio.subprocess.Process]] = {}

    async def start(self) -> None:
        return None

    async def aclose(self) -> None:
        for cid in list(self._running):
            self._kill(cid)

    def running(self) -> int:
        return len(self._running)

    def _kill(self, cid: str, sig: int = signal.SIGKILL) -> None:
        entry = self._running.get(cid)
        if entry is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(entry[1].pid, sig)

    async def kill_principal(self, key: str) -> int:
        """End every command of this principal (or of every session under a user prefix)."""
        prefix = key.rstrip("/") + "/"
        victims = [c for c, (k, _) in self._running.items() if k == key or k.startswith(prefix)]
        for cid in victims:
            self._kill(cid)
        return len(victims)

    async def run(
        self, spec: CommandSpec, principal: Principal, sink: Sink, cid: str | None = None
    ) -> CommandResult:
        cid = cid or uuid.uuid4().hex[:12]
        if not Path(spec.cwd).is_dir():
            raise UsageError(
                f"working directory {spec.cwd!r} does not exist",
                hint="pass an existing directory as cwd",
            )
        timeout = spec.timeout_s or self.default_timeout
        started = time.monotonic()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        try:
            proc = await asyncio.create_subprocess_exec(
                *spec.argv,
                cwd=spec.cwd,
                env=spec.env or None,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                preexec_fn=_limits(spec.resources.mem_mb, None) if spec.resources.mem_mb else None,
            )
        except FileNotFoundError:
            return CommandResult(
                id=cid,
                exit_code=127,
                state="error",
                duration_s=time.monotonic() - started,
                reason=f"command not found: {spec.argv[0]}",
            )
        except PermissionError:
            return CommandResult(
                id=cid,
                exit_code=126,
                state="error",
                duration_s=time.monotonic() - started,
                reason=f"permission denied: {spec.argv[0]} is not executable",
            )
        self._running[cid] = (principal.key, proc)
        tails = {"stdout": _Tail(self.output_cap), "stderr": _Tail(self.output_cap)}

        async def pump(name: str, stream: asyncio.StreamReader | None) -> None:
            if stream is None:
                return
            while chunk := await stream.read(_CHUNK):
                tails[name].add(chunk)
                await sink(name, chunk)

        pumps = asyncio.gather(pump("stdout", proc.stdout), pump("stderr", proc.stderr))
        state = "completed"
        reason = ""
        try:
            async with asyncio.timeout(timeout):
                await _exited(proc)
                try:
                    async with asyncio.timeout(PIPE_GRACE_S):
                        await asyncio.shield(pumps)
                except TimeoutError:
                    # background children still hold the pipes after the command
                    # exited: end them (commands are short; nothing may linger)
                    reason = "ended background processes left running by the command"
                    self._kill(cid)
                    await pumps
                await proc.wait()
        except TimeoutError:
            state, reason = "timeout", f"killed after the {timeout:g} s timeout"
            self._kill(cid)
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                async with asyncio.timeout(5):
                    await pumps
            await proc.wait()
        except asyncio.CancelledError:
            self._kill(cid)
            raise
        finally:
            self._running.pop(cid, None)
        code = proc.returncode
        if state == "completed":
            if code is not None and code < 0:
                state, reason = "failed", f"killed by signal {signal.Signals(-code).name}"
            elif code:
                state = "failed"
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
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
            cpu_s=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            max_rss_kb=int(after.ru_maxrss),
        )
