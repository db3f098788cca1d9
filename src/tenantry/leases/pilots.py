"""The pilot side of the lease manager: authenticate, attach, read, detach.

``PilotLinks`` is the half of ``LeaseManager`` that talks to pilots over
their TCP connections; the manager (pools, pump, lifecycle) is the other half
and provides the few hooks declared at the top of the class.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections import deque
from typing import Any

from tenantry.backends.base import Backend
from tenantry.core.errors import TenantryError
from tenantry.core.events import EventType
from tenantry.core.models import CommandResult
from tenantry.core.tasks import TaskGroup
from tenantry.leases.model import Lease, LeaseConfig, PoolKey
from tenantry.leases.pilot import protocol as p
from tenantry.leases.state import EXIT_STATE, Cmd, Live, lease_ready
from tenantry.leases.store import LeaseStore

log = logging.getLogger("tenantry.leases.manager")


class PilotLinks:
    cfg: LeaseConfig
    store: LeaseStore
    backend: Backend
    _live: dict[str, Live]
    _queues: dict[PoolKey, deque[Cmd]]
    _tasks: TaskGroup
    _closing: bool

    # -- provided by LeaseManager ----------------------------------------------------------
    def _pump(self) -> None:
        raise NotImplementedError

    def _account(self, live: Live) -> None:
        raise NotImplementedError

    def _orphan(self, cid: str, lease: Lease) -> Cmd:
        raise NotImplementedError

    async def _lose(self, live: Live, reason: str) -> None:
        raise NotImplementedError

    async def _end(self, live: Live, state: str, reason: str, **data: Any) -> None:
        raise NotImplementedError

    async def _emit(self, kind: EventType, lease: Lease, *, subject: str = "", **kw: Any) -> None:
        raise NotImplementedError

    # -- connections -----------------------------------------------------------------------
    async def _serve_pilot(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.adopt(task, "pilot-link")
        live: Live | None = None
        try:
            async with asyncio.timeout(10):
                hello = await p.recv(reader)
            if not isinstance(hello, p.Hello):
                return
            live = await self._authenticate(hello, reader, writer)
            if live is None:
                return
            await self._welcome(live, hello, writer)
            await self._read_pilot(live, reader, writer)
        except (TimeoutError, OSError, TenantryError) as exc:
            log.info("pilot connection ended: %s", exc)
        finally:
            p.unseal(reader, writer)
            writer.close()
            if live is not None and live.writer is writer:
                live.writer = None
                if not self._closing:
                    await self._on_disconnect(live)

    async def _authenticate(
        self, hello: p.Hello, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> Live | None:
        """Mutual proof of the lease key; the live lease, or None (rejected)."""
        live = self._live.get(hello.lease)
        if live is None or not live.lease.active:
            p.send(writer, p.Reject(reason="unknown or ended lease"))
            await writer.drain()
            return None
        key = bytes.fromhex(live.lease.secret_hash)
        nonce = secrets.token_hex(16)
        mine = p.proof(key, "daemon", hello.lease, hello.nonce, nonce)
        p.send(writer, p.Welcome(heartbeat_s=self.cfg.heartbeat_s, nonce=nonce, proof=mine))
        await writer.drain()
        async with asyncio.timeout(10):
            auth = await p.recv(reader)
        if not isinstance(auth, p.Auth) or not p.check(
            key, "pilot", hello.lease, nonce, hello.nonce, auth.proof
        ):
            log.warning("pilot for lease %s failed authentication", hello.lease)
            p.send(writer, p.Reject(reason="authentication failed"))
            await writer.drain()
            return None
        p.seal(
            reader, writer, key, me="daemon", lease=hello.lease,
            pilot_nonce=hello.nonce, daemon_nonce=nonce,
        )  # fmt: skip
        return live

    async def _welcome(self, live: Live, hello: p.Hello, writer: asyncio.StreamWriter) -> None:
        lease = live.lease
        if live.writer is not None:
            live.writer.close()  # superseded by this connection
        if live.watch is not None:
            live.watch.cancel()
            live.watch = None
        self._account(live)
        first = lease.ready_at is None
        lease.slots = max(1, hello.slots)
        lease.walltime_end = hello.walltime_end or lease.walltime_end
        lease.host, lease.pid = hello.host, hello.pid
        lease.ready_at = lease.ready_at or time.time()
        lease.state = "draining" if hello.draining or lease.state == "draining" else "ready"
        lease.reason = ""
        live.writer = writer
        live.envs.clear()  # a new connection: send each environment again
        known = set(hello.running) | set(hello.finished)
        for cid in [c for c in live.running if c not in known]:
            self._requeue(live.running.pop(cid))  # never reached the pilot
        for cid in hello.running:
            if cid not in live.running:  # started under an earlier daemon
                live.running[cid] = self._orphan(cid, lease)
        await writer.drain()
        await self.store.save(lease)
        if first:
            await self._emit(
                EventType.LEASE_READY,
                lease,
                duration_s=lease.ready_at - lease.created_at,
                data={"host": lease.host, "slots": lease.slots},
            )
        self._pump()

    async def _read_pilot(
        self, live: Live, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        live.heard = time.monotonic()
        beat = asyncio.create_task(self._beat(live, writer))
        try:
            while True:
                msg = await p.recv(reader)
                if msg is None:
                    return
                live.heard = time.monotonic()
                if isinstance(msg, p.Output):
                    await self._on_output(live, msg.id, msg.stream, msg.data)
                elif isinstance(msg, p.Exit):
                    await self._on_exit(live, msg)
                    p.ack(writer, msg.id)  # this turn's acks go together
                elif isinstance(msg, p.Drain):  # the pilot drains on its own clock
                    if lease_ready(live):
                        live.lease.state, live.lease.reason, live.final = (
                            "draining",
                            msg.reason,
                            "ended",
                        )
                    self._after(live)
                elif isinstance(msg, p.Replay):
                    for ex in msg.results:
                        await self._on_exit(live, ex, replayed=True)
                        p.ack(writer, ex.id)
                elif not isinstance(msg, p.Heartbeat):
                    raise TenantryError(f"unexpected {msg.t} message from pilot")
        finally:
            beat.cancel()

    async def _beat(self, live: Live, writer: asyncio.StreamWriter) -> None:
        silence = 4 * self.cfg.heartbeat_s
        while not writer.is_closing():
            await asyncio.sleep(self.cfg.heartbeat_s)
            if time.monotonic() - live.heard > silence:
                log.warning("lease %s: pilot silent for %.0f s", live.lease.id, silence)
                writer.close()  # the reader sees end of stream: disconnected
                return
            p.send(writer, p.Heartbeat(ts=time.time()))

    def _send(self, live: Live, msg: p.Message) -> None:
        if live.writer is not None and not live.writer.is_closing():
            p.send(live.writer, msg)

    async def _on_output(self, live: Live, cid: str, stream: str, data: bytes) -> None:
        cmd = live.running.get(cid)
        if cmd is None:
            return
        (cmd.out if stream == "stdout" else cmd.err).add(data)
        if not cmd.future.done():
            try:
                await cmd.sink(stream, data)
            except Exception:  # a broken consumer never breaks the lease
                log.exception("output sink of command %s failed", cid)

    async def _on_exit(self, live: Live, ex: p.Exit, *, replayed: bool = False) -> None:
        lease = live.lease
        self._account(live)
        cmd = live.running.pop(ex.id, None)
        if ex.state == "refused":
            if cmd is not None:
                self._requeue(cmd, front=True)
            if "draining" in ex.reason and lease.state == "ready":
                lease.state, live.final = "draining", "ended"
            self._after(live)
            return
        for stream, data in (("stdout", ex.stdout), ("stderr", ex.stderr)):
            if data and cmd is not None:
                await self._on_output_of(cmd, stream, data)
        lease.served += 1
        lease.last_used = time.monotonic()
        result = CommandResult(
            id=ex.id,
            exit_code=ex.code,
            state=EXIT_STATE.get(ex.state, "error"),
            duration_s=ex.duration_s,
            where="lease",
            stdout_tail=cmd.out.text() if cmd else ex.stdout.decode("utf-8", "replace"),
            stderr_tail=cmd.err.text() if cmd else ex.stderr.decode("utf-8", "replace"),
            truncated=(cmd.out.truncated or cmd.err.truncated) if cmd else ex.truncated,
            reason=ex.reason or ("cancelled" if ex.state == "cancelled" else ""),
            cpu_s=ex.cpu_s,
            max_rss_kb=ex.max_rss_kb,
        )
        if cmd is not None and not cmd.orphan and not cmd.future.done():
            cmd.future.set_result(result)
        elif cmd is None or cmd.orphan:
            # nobody waits any more (the daemon restarted): keep it for `leases.result`
            await self.store.put_result(lease.id, result)
            await self._emit(
                EventType.COMMAND_FINISHED,
                lease,
                subject=ex.id,
                outcome=result.state,
                duration_s=result.duration_s,
                data={"lease": lease.id, "exit_code": ex.code, "replayed": replayed},
            )
        self._after(live)

    async def _on_output_of(self, cmd: Cmd, stream: str, data: bytes) -> None:
        (cmd.out if stream == "stdout" else cmd.err).add(data)
        with contextlib.suppress(Exception):
            await cmd.sink(stream, data)

    def _after(self, live: Live) -> None:
        if live.lease.state == "draining" and not live.running:
            self._send(live, p.Release(reason=live.lease.reason or "drained"))
        self._pump()

    def _requeue(self, cmd: Cmd, *, front: bool = True) -> None:
        if cmd.future.done():
            return
        cmd.lease = ""
        q = self._queues.setdefault(cmd.key, deque())
        if front:
            q.appendleft(cmd)
        else:
            q.append(cmd)

    async def _on_disconnect(self, live: Live) -> None:
        lease = live.lease
        if not lease.active:
            return
        self._account(live)
        near_end = lease.walltime_end and time.time() >= lease.walltime_end - self.cfg.drain_s - 1
        if not live.running and (lease.state == "draining" or near_end):
            await self._end(live, live.final, lease.reason or "walltime")
            return
        lease.state = "disconnected"
        lease.reason = "pilot disconnected"
        self._watch(live)

    def _watch(self, live: Live) -> None:
        live.watch = asyncio.create_task(self._await_return(live))

    async def _await_return(self, live: Live) -> None:
        lease = live.lease
        deadline = time.monotonic() + self.cfg.reconnect_grace_s
        reason = "lease lost: pilot did not reconnect"
        while time.monotonic() < deadline and live.writer is None:
            ended = await self._job_ended(lease)
            if ended:
                reason = f"lease lost: pilot job ended ({ended})"
                break
            await asyncio.sleep(min(0.25, self.cfg.reconnect_grace_s / 4))
        if live.writer is None and lease.active:
            await self._lose(live, reason)

    async def _job_ended(self, lease: Lease) -> str:
        if not lease.backend_id:
            return ""
        try:
            ups = await self.backend.query([lease.backend_id])
        except TenantryError:
            return ""
        up = ups.get(lease.backend_id)
        if up is not None and up.state.terminal:
            return f"{up.state.value}{': ' + up.reason if up.reason else ''}"
        return ""
