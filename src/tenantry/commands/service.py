"""Run one short command for a principal: route, journal, stream, record.

Routing is Tenantry's (``tenantry.service.placement``): the login node runs
only the facility's cheap commands; an agent's ``where`` is a preference, and
its other commands go to a warm lease (the ``leases`` component) or are
refused. On failure, lessons from the facility memory that
match the error are attached to the result as data with provenance.
"""

from __future__ import annotations

import asyncio
import codecs
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from tenantry.commands.runner import LocalRunner, end_leftover
from tenantry.core.errors import SessionStopped, Unavailable
from tenantry.core.events import Event, EventType
from tenantry.core.models import CommandResult, CommandSpec, Principal
from tenantry.service.placement import Placement, place
from tenantry.service.seams import Sink

if TYPE_CHECKING:
    from tenantry.service.runtime import Runtime

log = logging.getLogger(__name__)

TAIL_IN_EVENT = 2000


class CommandService:
    def __init__(self, runtime: Runtime, runner: LocalRunner) -> None:
        self.rt = runtime
        self.runner = runner

    async def start(self) -> None:
        """Commands end with the daemon that ran them (they are short; their
        client's stream is gone): the child got SIGKILL when the daemon died
        (PR_SET_PDEATHSIG), and whatever of its process group survived is
        ended here, then the command is recorded as ``lost``."""
        ended = 0
        for _cid, pid, start in await self.rt.journal.running_commands():
            if pid and end_leftover(pid, start):
                ended += 1
        n = await self.rt.journal.abandon_running_commands()
        if n:
            log.info(
                "%d command(s) were running when the last daemon stopped; %d process "
                "group(s) of them ended now",
                n,
                ended,
            )

    async def aclose(self) -> None:
        return None

    def placement(self, p: Principal, spec: CommandSpec) -> Placement:
        """Where ``spec`` runs for ``p`` (an agent's ``where`` is only a preference)."""
        return place(
            spec,
            agent=p.is_agent,
            settings=self.rt.settings,
            backend=self.rt.backend.name,
            leases=self.rt.leases is not None,
        )

    async def run(self, p: Principal, spec: CommandSpec, sink: Sink) -> CommandResult:
        placed = self.placement(p, spec)
        where = placed.where
        if self.rt.sandboxes is not None:  # a sandboxed session's commands run under its profile
            spec = self.rt.sandboxes.confine(spec, p, where)
        cid = uuid.uuid4().hex[:12]
        started_at = time.time()
        loop = asyncio.get_running_loop()
        # the start row is queued on the journal's writer and not waited for: the
        # writer keeps order, and the end is written after it (_settled)
        started: list[asyncio.Task[None]] = []
        if where == "lease":
            coro = self.rt.journal.command_started(cid, p, spec.argv, spec.cwd, where)
            started.append(loop.create_task(coro))
        # a local command's one row is written once it runs, with its pid (the
        # next daemon ends what a crash left of it); one that never started
        # (not found) gets its row with its end
        await self.rt.emit(
            Event(
                EventType.COMMAND_STARTED,
                p.key,
                cid,
                "",
                None,
                {"argv": list(spec.argv), "cwd": spec.cwd, "where": where},
            )
        )
        t0 = time.monotonic()

        async def on_start(pid: int, pid_start: int | None) -> None:
            # the runner has it in its table now: a stop from here on finds it there,
            # and one that came after the gates let it through ends it here
            if self._stopped(p):
                await self.runner.kill_principal(p.key)
            coro = self.rt.journal.command_started(
                cid,
                p,
                spec.argv,
                spec.cwd,
                where,
                pid=pid,
                pid_start=pid_start,
                started_at=started_at,
            )
            started.append(loop.create_task(coro))

        try:
            if where == "lease":
                if self.rt.leases is None:  # _where saw one: it stopped since
                    raise Unavailable("the lease manager is not running in this daemon")
                # queued without a pause after this check, so a later stop drains it
                if self._stopped(p):
                    raise SessionStopped("stopped by the kill switch", hint="ask the operator")
                result = await self.rt.leases.run(spec, p, sink, cid=cid)
            else:
                result = await self.runner.run(spec, p, sink, cid=cid, on_start=on_start)
        except BaseException as exc:
            await _settled(started)
            await self._ended(cid, p, spec, started_at, where, time.monotonic() - t0, str(exc))
            raise
        result.id = cid
        result.note = placed.note
        await _settled(started)
        await self._ended(cid, p, spec, started_at, result.where, result.duration_s, result)
        if result.state != "completed":
            result.lessons = await self.lessons_for(
                p, result.stderr_tail or result.stdout_tail or result.reason
            )
        return result

    def _stopped(self, p: Principal) -> bool:
        """Did an operator stop ``p`` after the gates let this command through?"""
        return self.rt.stops is not None and self.rt.stops.stopped(p) is not None

    async def _ended(
        self,
        cid: str,
        p: Principal,
        spec: CommandSpec,
        started_at: float,
        where: str,
        duration_s: float,
        outcome: CommandResult | str,
    ) -> None:
        """A command's end (its result, or the error that stopped it): its journal row,
        then its ``command.finished`` event."""
        data: dict[str, Any] = {"argv": list(spec.argv), "cwd": spec.cwd}
        if isinstance(outcome, str):
            state, code, reason, cpu_s, rss = "error", None, outcome, 0.0, 0
            extra: dict[str, Any] = {"error": outcome}
        else:
            r = outcome
            state, code, reason, cpu_s, rss = r.state, r.exit_code, r.reason, r.cpu_s, r.max_rss_kb
            extra = {
                "stdout_tail": r.stdout_tail[-TAIL_IN_EVENT:],
                "stderr_tail": r.stderr_tail[-TAIL_IN_EVENT:],
                "cpu_s": cpu_s,
                "reason": reason,
            }
        await self.rt.journal.command_finished(
            cid,
            p,
            spec.argv,
            spec.cwd,
            started_at=started_at,
            exit_code=code,
            state=state,
            reason=reason,
            cpu_s=cpu_s,
            max_rss_kb=rss,
            where=where,
        )
        data.update(exit_code=code, where=where, **extra)
        await self.rt.emit(Event(EventType.COMMAND_FINISHED, p.key, cid, state, duration_s, data))

    async def lessons_for(self, p: Principal, text: str) -> list[dict[str, Any]]:
        memory = self.rt.lessons
        if memory is None or not text.strip():
            return []
        try:
            lessons = await memory.lessons_for_failure(p, text[-4000:])
        except Exception:  # memory must never break a command result
            log.exception("lesson lookup failed")
            return []
        return lessons


async def _settled(tasks: list[asyncio.Task[None]]) -> None:
    """Wait for a command's start row (its end is written next, over it)."""
    for task in tasks:
        try:
            await asyncio.shield(task)
        except Exception:  # the end's upsert writes the whole row anyway
            log.exception("the command's start row was not written")


class Utf8Chunks:
    """Decode a byte stream to text without splitting multi-byte characters."""

    def __init__(self) -> None:
        self._dec: dict[str, codecs.IncrementalDecoder] = {}  # made at a stream's first byte

    def feed(self, stream: str, data: bytes) -> str:
        dec = self._dec.get(stream)
        if dec is None:
            dec = self._dec[stream] = codecs.getincrementaldecoder("utf-8")(errors="replace")
        return dec.decode(data)

    def flush(self, stream: str) -> str:
        dec = self._dec.get(stream)
        return dec.decode(b"", final=True) if dec is not None else ""
