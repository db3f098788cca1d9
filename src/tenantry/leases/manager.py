"""The lease manager: pools of warm pilot allocations that run short commands.

Commands queue per pool (user, account, partition, slot shape). The pump
hands each queued command to a ready lease of its pool with a free slot,
packing onto the busiest lease so spare ones go idle and are released; when
demand exceeds what is ready or starting, it acquires another lease (a pilot
job submitted through the backend) within the per-user and per-session caps.

Pilots dial back over TCP and both sides prove the lease key (SHA-256 of
its secret, kept in ``<state>/leases.sqlite3``; see ``pilot.protocol``), so
after a daemon restart a pilot that reconnects is recognised and the results
it replays are kept. A pilot that
vanishes has ``reconnect_grace_s`` to come back (less if the backend says its
job ended); then its lease is lost and its commands end ``lost`` (retried
once on another lease if marked idempotent). In the last ``drain_s`` of a
lease's walltime it gets nothing new; queued commands go to other leases.
Idle core-seconds (free slots x cores x time) are tracked per lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tenantry.backends.base import Backend
from tenantry.errors import (
    BackendError,
    LeaseCapReached,
    NotFound,
    SessionStopped,
    TenantryError,
    Unavailable,
)
from tenantry.events import Bus, Event, EventType
from tenantry.leases.model import Lease, LeaseConfig, PoolKey, pilot_script, pythonpath_of_package
from tenantry.leases.routing import route
from tenantry.leases.store import LeaseStore
from tenantry.models import CommandResult, CommandSpec, JobSpec, Principal
from tenantry.pilot import protocol as p
from tenantry.pilot.worker import SECRET_ENV
from tenantry.settings import Settings

log = logging.getLogger(__name__)

Sink = Callable[[str, bytes], Awaitable[None]]

_STATE_OF_EXIT = {
    "completed": "completed",
    "failed": "failed",
    "timeout": "timeout",
    "cancelled": "error",
    "error": "error",
}


def _hash(secret: str) -> str:
    return p.key_of(secret).hex()


class _Tail:
    """The last ``cap`` bytes of a stream."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.buf = bytearray()
        self.truncated = False

    def add(self, data: bytes) -> None:
        self.buf += data
        if len(self.buf) > 2 * self.cap:
            del self.buf[: len(self.buf) - self.cap]
            self.truncated = True

    def text(self) -> str:
        if len(self.buf) > self.cap:
            self.truncated = True
            return bytes(self.buf[-self.cap :]).decode("utf-8", "replace")
        return self.buf.decode("utf-8", "replace")


@dataclass(eq=False)
class _Cmd:
    id: str
    spec: CommandSpec
    principal: Principal
    sink: Sink
    key: PoolKey
    future: asyncio.Future[CommandResult]
    out: _Tail
    err: _Tail
    need_s: float = 0.0
    queued_at: float = field(default_factory=time.monotonic)
    attempts: int = 0
    lease: str = ""
    orphan: bool = False  # started by an earlier daemon; its result goes to the store


@dataclass(eq=False)
class _Live:
    """A lease plus what only the running daemon knows of it."""

    lease: Lease
    writer: asyncio.StreamWriter | None = None
    running: dict[str, _Cmd] = field(default_factory=dict)
    watch: asyncio.Task[None] | None = None
    final: str = "ended"  # terminal state once a draining pilot exits
    secret: str = field(default="", repr=False)
    next_query: float = 0.0
    heard: float = 0.0  # monotonic time of the pilot's last message


class LeaseManager:
    """The ``leases`` component. ``run`` has the command-runner signature."""

    def __init__(
        self,
        settings: Settings,
        backend: Backend,
        bus: Bus | None = None,
        config: LeaseConfig | None = None,
        *,
        python: str = sys.executable,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.bus = bus
        self.cfg = config or LeaseConfig.from_settings(settings)
        self.python = python
        self.dir = settings.state_path / "leases"
        self.store = LeaseStore(settings.state_path / "leases.sqlite3")
        self.address: tuple[str, int] = (self.cfg.listen_host, 0)
        self._live: dict[str, _Live] = {}
        self._queues: dict[PoolKey, deque[_Cmd]] = {}
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reaper: asyncio.Task[None] | None = None
        self._closing = False

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        await self.store.start()
        for lease in await self.store.active():
            live = _Live(lease)
            self._live[lease.id] = live
            if lease.state != "pending":
                lease.state = "disconnected"
                self._watch(live)
        port = self.cfg.listen_port
        stored = await self.store.get_meta("port")
        candidates = [port] if port else ([int(stored)] if stored else []) + [0]
        err: OSError | None = None
        for cand in candidates:
            try:
                self._server = await asyncio.start_server(
                    self._serve_pilot, self.cfg.listen_host, cand, limit=p.MAX_LINE + 1
                )
                break
            except OSError as exc:
                err = exc
        if self._server is None:
            raise Unavailable(f"cannot listen for pilots on {self.cfg.listen_host}: {err}")
        sock = self._server.sockets[0].getsockname()
        self.address = (self.cfg.listen_host, int(sock[1]))
        await self.store.set_meta("port", str(self.address[1]))
        self._reaper = asyncio.create_task(self._reap_forever())

    async def aclose(self) -> None:
        """Stop serving. Leases stay alive: their pilots redial the next daemon."""
        self._closing = True
        if self._reaper is not None:
            self._reaper.cancel()
        if self._server is not None:
            self._server.close()
        for live in self._live.values():
            if live.watch is not None:
                live.watch.cancel()
            if live.writer is not None:
                live.writer.close()
            for cmd in live.running.values():
                _fail(cmd, Unavailable("the daemon stopped while the command ran"))
        for q in self._queues.values():
            for cmd in q:
                _fail(cmd, Unavailable("the daemon stopped before the command started"))
        self._queues.clear()
        if self._tasks:  # pilot connections end as their sockets close
            await asyncio.wait(list(self._tasks), timeout=5)
        for task in list(self._tasks):
            task.cancel()
        for live in self._live.values():
            self._account(live)
            await self.store.save(live.lease)
        await self.store.aclose()

    async def release_all(self, reason: str = "daemon released all leases") -> None:
        for lid in [lid for lid, live in self._live.items() if live.lease.active]:
            await self.release(lid, reason=reason)

    # -- the command runner ------------------------------------------------------------
    async def run(
        self,
        spec: CommandSpec,
        principal: Principal,
        sink: Sink,
        cid: str | None = None,
    ) -> CommandResult:
        """Run one command on a lease that fits; stream its output through ``sink``."""
        if self._closing:
            raise Unavailable("the lease manager is stopping")
        cap = self.cfg.output_cap_bytes
        cmd = _Cmd(
            id=cid or f"c-{secrets.token_hex(6)}",
            spec=spec,
            principal=principal,
            sink=sink,
            key=PoolKey.of(principal, spec.resources, self.settings),
            future=asyncio.get_running_loop().create_future(),
            out=_Tail(cap),
            err=_Tail(cap),
            need_s=float(spec.resources.time_s or 0),
        )
        self._queues.setdefault(cmd.key, deque()).append(cmd)
        self._pump()
        try:
            return await cmd.future
        except asyncio.CancelledError:
            self._abandon(cmd)
            raise

    def route(self, spec: CommandSpec) -> str:
        """``local`` or ``lease`` for a command (the gateway asks this for where=auto)."""
        return route(spec, self.settings)

    def _orphan(self, cid: str, lease: Lease) -> _Cmd:
        async def drop(stream: str, data: bytes) -> None:
            return None

        cap = self.cfg.output_cap_bytes
        return _Cmd(
            id=cid,
            spec=CommandSpec(argv=("?",)),
            principal=Principal(uid=lease.uid, user=lease.key.user),
            sink=drop,
            key=lease.key,
            future=asyncio.get_running_loop().create_future(),
            out=_Tail(cap),
            err=_Tail(cap),
            lease=lease.id,
            orphan=True,
        )

    def _abandon(self, cmd: _Cmd) -> None:
        q = self._queues.get(cmd.key)
        if q is not None and cmd in q:
            q.remove(cmd)
        live = self._live.get(cmd.lease)
        if live is not None and cmd.id in live.running and not self._closing:
            self._send(live, p.Cancel(id=cmd.id))

    # -- pump: queued commands -> leases -----------------------------------------------
    def _pump(self) -> None:
        if self._closing:
            return
        for key in list(self._queues):
            q = self._queues[key]
            while q:
                cmd = q[0]
                if cmd.future.done():
                    q.popleft()
                    continue
                live = self._pick(key, cmd)
                if live is None:
                    break
                q.popleft()
                self._dispatch(live, cmd)
            if q:
                self._grow(key, q)
            if not q:
                self._queues.pop(key, None)

    def _pick(self, key: PoolKey, cmd: _Cmd) -> _Live | None:
        best: _Live | None = None
        deadline = time.time() + cmd.need_s + self.cfg.drain_s
        for live in self._live.values():
            lease = live.lease
            if lease.key != key or lease.state != "ready" or live.writer is None:
                continue
            if len(live.running) >= lease.slots + self.cfg.prefetch:
                continue
            if lease.walltime_end and deadline > lease.walltime_end:
                continue
            # prefer a free slot; among those, the busiest lease (spare ones go idle)
            key_ = (len(live.running) < lease.slots, len(live.running))
            if best is None or key_ > (len(best.running) < best.lease.slots, len(best.running)):
                best = live
        return best

    def _dispatch(self, live: _Live, cmd: _Cmd) -> None:
        self._account(live)
        cmd.attempts += 1
        cmd.lease = live.lease.id
        live.running[cmd.id] = cmd
        spec = cmd.spec
        self._send(
            live,
            p.Run(
                id=cmd.id,
                argv=tuple(spec.argv),
                cwd=spec.cwd,
                env=dict(spec.env),
                timeout_s=spec.timeout_s or self.settings.command_timeout_s,
            ),
        )

    def _grow(self, key: PoolKey, q: deque[_Cmd]) -> None:
        waiting = [c for c in q if not c.future.done()]
        pool = [lv for lv in self._live.values() if lv.lease.key == key and lv.lease.active]
        # starting pilots, and pilots that are expected back (daemon restart, blip)
        coming = sum(lv.lease.slots for lv in pool if lv.lease.state in ("pending", "disconnected"))
        while len(waiting) > coming:
            owner = waiting[0].principal
            user_n = sum(
                1 for lv in self._live.values() if lv.lease.active and lv.lease.key.user == key.user
            )
            sess_n = sum(
                1 for lv in self._live.values() if lv.lease.active and lv.lease.owner == owner.key
            )
            if user_n >= self.cfg.max_per_user or sess_n >= self.cfg.max_per_session:
                self._make_room(key, waiting, pool, user_n, sess_n)
                return
            need = max(c.need_s for c in waiting)
            self._acquire(key, owner, need)
            coming += self.cfg.slots

    def _make_room(
        self, key: PoolKey, waiting: list[_Cmd], pool: list[_Live], user_n: int, sess_n: int
    ) -> None:
        idle = [
            lv
            for lv in self._live.values()
            if lv.lease.key.user == key.user
            and lv.lease.key != key
            and lv.lease.state == "ready"
            and not lv.running
        ]
        if idle:
            victim = min(idle, key=lambda lv: lv.lease.last_used)
            self._spawn(self.release(victim.lease.id, reason="room for another pool"))
            return
        if any(lv.lease.state in ("ready", "pending", "disconnected") for lv in pool):
            return  # this pool's leases will free a slot
        which = "user" if user_n >= self.cfg.max_per_user else "session"
        limit = self.cfg.max_per_user if which == "user" else self.cfg.max_per_session
        err = LeaseCapReached(
            f"{which} already holds {limit} busy lease(s), the most allowed",
            hint="wait for running commands to finish, or `tenantry leases release ID`",
        )
        for cmd in waiting:
            _fail(cmd, err)

    def _acquire(self, key: PoolKey, owner: Principal, need_s: float) -> None:
        secret = secrets.token_urlsafe(32)
        lease = Lease(
            id=f"l-{secrets.token_hex(4)}",
            key=key,
            uid=owner.uid,
            owner=owner.key,
            secret_hash=_hash(secret),
            backend=self.backend.name,
            slots=self.cfg.slots,
        )
        live = _Live(lease, secret=secret)
        self._live[lease.id] = live
        self._spawn(self._submit(live, owner, need_s))

    async def _submit(self, live: _Live, owner: Principal, need_s: float) -> None:
        lease = live.lease
        time_s = int(max(self.cfg.time_s, need_s + self.cfg.drain_s + 1))
        secret_file = self.dir / f"{lease.id}.secret"
        fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(live.secret)
        host, port = self.address
        text = pilot_script(
            python=self.python,
            pythonpath=pythonpath_of_package(),
            host=host,
            port=port,
            lease_id=lease.id,
            slots=lease.slots,
            time_s=time_s,
            cfg=self.cfg,
            secret_file=str(secret_file),
        )
        script = self.dir / f"{lease.id}.sh"
        script.write_text(text)
        script.chmod(0o700)
        spec = JobSpec(
            script=str(script),
            script_text=text,
            cwd=str(self.dir),
            name=f"tenantry-lease-{lease.id}",
            resources=lease.key.allocation(lease.slots, time_s),
            output=str(self.dir / f"{lease.id}.out"),
            env={SECRET_ENV: live.secret},
        )
        live.secret = ""
        try:
            await self.store.save(lease)
            sub = await self.backend.submit(spec, owner, lease.id)
        except Exception as exc:
            err = exc if isinstance(exc, TenantryError) else BackendError(str(exc))
            log.warning("lease %s: pilot job not submitted: %s", lease.id, err)
            await self._end(live, "lost", f"pilot job not submitted: {err}")
            for cmd in self._queues.get(lease.key, ()):
                _fail(cmd, err)
            return
        lease.backend_id = sub.backend_id
        await self.store.save(lease)
        await self._emit(
            EventType.LEASE_REQUESTED,
            lease,
            data={"backend_id": sub.backend_id, "pool": lease.key.label(), "slots": lease.slots},
        )

    # -- pilots ------------------------------------------------------------------------
    async def _serve_pilot(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        live: _Live | None = None
        try:
            hello = await asyncio.wait_for(p.recv(reader), 10)
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
            writer.close()
            if live is not None and live.writer is writer:
                live.writer = None
                if not self._closing:
                    await self._on_disconnect(live)

    async def _authenticate(
        self, hello: p.Hello, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> _Live | None:
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
        auth = await asyncio.wait_for(p.recv(reader), 10)
        if not isinstance(auth, p.Auth) or not p.check(
            key, "pilot", hello.lease, nonce, hello.nonce, auth.proof
        ):
            log.warning("pilot for lease %s failed authentication", hello.lease)
            p.send(writer, p.Reject(reason="authentication failed"))
            await writer.drain()
            return None
        return live

    async def _welcome(self, live: _Live, hello: p.Hello, writer: asyncio.StreamWriter) -> None:
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
        self, live: _Live, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
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
                    p.send(writer, p.Ack(ids=(msg.id,)))
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
                    p.send(writer, p.Ack(ids=tuple(ex.id for ex in msg.results)))
                elif not isinstance(msg, p.Heartbeat):
                    raise TenantryError(f"unexpected {msg.t} message from pilot")
        finally:
            beat.cancel()

    async def _beat(self, live: _Live, writer: asyncio.StreamWriter) -> None:
        silence = 4 * self.cfg.heartbeat_s
        while not writer.is_closing():
            await asyncio.sleep(self.cfg.heartbeat_s)
            if time.monotonic() - live.heard > silence:
                log.warning("lease %s: pilot silent for %.0f s", live.lease.id, silence)
                writer.close()  # the reader sees end of stream: disconnected
                return
            p.send(writer, p.Heartbeat(ts=time.time()))

    def _send(self, live: _Live, msg: p.Message) -> None:
        if live.writer is not None and not live.writer.is_closing():
            p.send(live.writer, msg)

    async def _on_output(self, live: _Live, cid: str, stream: str, data: bytes) -> None:
        cmd = live.running.get(cid)
        if cmd is None:
            return
        (cmd.out if stream == "stdout" else cmd.err).add(data)
        if not cmd.future.done():
            try:
                await cmd.sink(stream, data)
            except Exception:  # a broken consumer never breaks the lease
                log.exception("output sink of command %s failed", cid)

    async def _on_exit(self, live: _Live, ex: p.Exit, *, replayed: bool = False) -> None:
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
            state=_STATE_OF_EXIT.get(ex.state, "error"),
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

    async def _on_output_of(self, cmd: _Cmd, stream: str, data: bytes) -> None:
        (cmd.out if stream == "stdout" else cmd.err).add(data)
        with contextlib.suppress(Exception):
            await cmd.sink(stream, data)

    def _after(self, live: _Live) -> None:
        if live.lease.state == "draining" and not live.running:
            self._send(live, p.Release(reason=live.lease.reason or "drained"))
        self._pump()

    def _requeue(self, cmd: _Cmd, *, front: bool = True) -> None:
        if cmd.future.done():
            return
        cmd.lease = ""
        q = self._queues.setdefault(cmd.key, deque())
        if front:
            q.appendleft(cmd)
        else:
            q.append(cmd)

    async def _on_disconnect(self, live: _Live) -> None:
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

    def _watch(self, live: _Live) -> None:
        live.watch = asyncio.create_task(self._await_return(live))

    async def _await_return(self, live: _Live) -> None:
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

    async def _lose(self, live: _Live, reason: str) -> None:
        victims: list[_Cmd] = []
        for cmd in list(live.running.values()):
            if cmd.spec.idempotent and cmd.attempts < 2:
                self._requeue(cmd)
            else:
                victims.append(cmd)
        live.running.clear()
        await self._end(live, "lost", reason, commands_lost=len(victims))
        for cmd in victims:
            if not cmd.future.done():
                cmd.future.set_result(
                    CommandResult(
                        id=cmd.id,
                        exit_code=None,
                        state="lost",
                        duration_s=time.monotonic() - cmd.queued_at,
                        where="lease",
                        stdout_tail=cmd.out.text(),
                        stderr_tail=cmd.err.text(),
                        reason="lease lost",
                    )
                )
        if live.lease.backend_id:
            with contextlib.suppress(TenantryError):
                await self.backend.cancel(live.lease.backend_id)
        self._pump()

    async def _end(self, live: _Live, state: str, reason: str, **data: Any) -> None:
        lease = live.lease
        if not lease.active:
            return
        self._account(live)
        lease.state, lease.reason, lease.ended_at = state, reason, time.time()
        for suffix in (".secret", ".sh"):
            with contextlib.suppress(OSError):
                (self.dir / f"{lease.id}{suffix}").unlink()
        await self.store.save(lease)
        kind = EventType.LEASE_LOST if state == "lost" else EventType.LEASE_RELEASED
        await self._emit(
            kind,
            lease,
            outcome=state,
            data={
                "reason": reason,
                "served": lease.served,
                "idle_core_s": round(lease.idle_core_s, 3),
                **data,
            },
        )
        self._pump()

    # -- release, drain, kill switch -----------------------------------------------------
    async def release(self, lease_id: str, *, reason: str = "released") -> dict[str, Any]:
        live = self._live.get(lease_id)
        if live is None:
            raise NotFound(f"no lease {lease_id}", hint="see `tenantry leases`")
        lease = live.lease
        if lease.active:
            if live.writer is None:
                await self._end(live, "released", reason)
                if lease.backend_id:
                    with contextlib.suppress(TenantryError):
                        await self.backend.cancel(lease.backend_id)
            else:
                self._account(live)
                lease.state, lease.reason, live.final = "draining", reason, "released"
                self._send(live, p.Release(reason=reason))
                await self.store.save(lease)
        return self.describe(live)

    async def drain_principal(self, key: str) -> int:
        """Kill switch: stop this principal's commands and release the leases it owns.

        ``key`` is a ``Principal.key`` (``user/agent/session``) or a bare user name.
        Returns the number of leases released (the kill switch reports it).
        """

        def match(pkey: str) -> bool:
            return pkey == key if "/" in key else pkey.split("/", 1)[0] == key

        stopped = 0
        err = SessionStopped("stopped by the kill switch", hint="ask the operator")
        for q in self._queues.values():
            for cmd in [c for c in q if match(c.principal.key)]:
                q.remove(cmd)
                _fail(cmd, err)
                stopped += 1
        for live in self._live.values():
            for cmd in live.running.values():
                if match(cmd.principal.key):
                    self._send(live, p.Cancel(id=cmd.id))
                    stopped += 1
        owned = [lv for lv in self._live.values() if lv.lease.active and match(lv.lease.owner)]
        for lv in owned:
            await self.release(lv.lease.id, reason="kill switch")
        log.warning(
            "kill switch on %s: %d command(s) stopped, %d lease(s)", key, stopped, len(owned)
        )
        return len(owned)

    # -- housekeeping --------------------------------------------------------------------
    def _account(self, live: _Live) -> None:
        lease = live.lease
        now = time.monotonic()
        if lease.state in ("ready", "draining") and live.writer is not None:
            free = max(0, lease.slots - len(live.running))
            lease.idle_core_s += free * lease.key.cpus * max(0.0, now - lease.accounted_at)
        lease.accounted_at = now

    async def _reap_forever(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.tick_s)
            try:
                await self.reap()
            except Exception:
                log.exception("lease reaper failed")

    async def reap(self) -> None:
        """One housekeeping pass: walltime drain, idle release, dead pending jobs."""
        now_m, now = time.monotonic(), time.time()
        for live in list(self._live.values()):
            lease = live.lease
            if not lease.active:
                continue
            self._account(live)
            if (
                lease.state == "ready"
                and lease.walltime_end
                and now >= lease.walltime_end - self.cfg.drain_s
            ):
                lease.state, lease.reason, live.final = "draining", "walltime", "ended"
                self._send(live, p.Drain(reason="walltime"))
                self._after(live)
            elif (
                lease.state == "ready"
                and not live.running
                and now_m - lease.last_used >= self.cfg.idle_s
            ):
                await self.release(lease.id, reason="idle")
            elif lease.state == "pending" and now_m >= live.next_query:
                live.next_query = now_m + 2.0
                ended = await self._job_ended(lease)
                if ended:
                    await self._lose(live, f"pilot job ended before dialling back ({ended})")
            await self.store.save(lease)
        for q in self._queues.values():
            for cmd in [c for c in q if now_m - c.queued_at > self.cfg.start_timeout_s]:
                q.remove(cmd)
                _fail(
                    cmd,
                    Unavailable(
                        f"no lease became ready within {self.cfg.start_timeout_s:.0f} s",
                        hint="the scheduler may be busy; try --where local or later",
                    ),
                )
        self._pump()

    def _spawn(self, coro: Awaitable[Any]) -> None:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _emit(self, kind: EventType, lease: Lease, *, subject: str = "", **kw: Any) -> None:
        if self.bus is not None:
            await self.bus.publish(
                Event(kind, principal=lease.owner, subject=subject or lease.id, **kw)
            )

    # -- views -----------------------------------------------------------------------------
    def describe(self, live: _Live) -> dict[str, Any]:
        lease = live.lease
        self._account(live)
        queued = len(self._queues.get(lease.key, ()))
        idle = time.monotonic() - lease.last_used if not live.running else 0.0
        return {
            "id": lease.id,
            "state": lease.state,
            "user": lease.key.user,
            "owner": lease.owner,
            "pool": lease.key.label(),
            "account": lease.key.account,
            "partition": lease.key.partition,
            "shape": {"cpus": lease.key.cpus, "mem_mb": lease.key.mem_mb, "gpus": lease.key.gpus},
            "backend": lease.backend,
            "backend_id": lease.backend_id,
            "slots": lease.slots,
            "in_use": min(len(live.running), lease.slots),
            "sent_ahead": max(0, len(live.running) - lease.slots),
            "queued": queued if lease.active else 0,
            "idle_s": round(idle, 1) if lease.active else None,
            "served": lease.served,
            "idle_core_s": round(lease.idle_core_s, 1),
            "host": lease.host,
            "created_at": lease.created_at,
            "walltime_end": lease.walltime_end or None,
            "reason": lease.reason,
        }

    def leases(
        self, user: str | None = None, *, include_ended: bool = False
    ) -> list[dict[str, Any]]:
        out = [
            self.describe(lv)
            for lv in self._live.values()
            if (include_ended or lv.lease.active) and (user is None or lv.lease.key.user == user)
        ]
        return sorted(out, key=lambda d: d["created_at"])

    def lease_ids(self) -> list[str]:
        return list(self._live)

    async def result(self, command_id: str) -> dict[str, Any] | None:
        """A result a pilot replayed after the daemon that started the command went away."""
        return await self.store.result(command_id)

    @property
    def state_dir(self) -> Path:
        return self.dir


def lease_ready(live: _Live) -> bool:
    return live.lease.state == "ready"


def _fail(cmd: _Cmd, err: BaseException) -> None:
    if not cmd.future.done() and not cmd.orphan:
        cmd.future.set_exception(err)
