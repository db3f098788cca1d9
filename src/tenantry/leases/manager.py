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
import socket
import sys
import time
from collections import deque
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from tenantry.backends.base import Backend
from tenantry.client.wire import env_digest
from tenantry.core.errors import (
    BackendError,
    LeaseCapReached,
    NotFound,
    SessionStopped,
    TenantryError,
    Unavailable,
)
from tenantry.core.events import Bus, Event, EventType
from tenantry.core.models import CommandResult, CommandSpec, JobSpec, Principal
from tenantry.core.settings import Settings
from tenantry.core.tasks import TaskGroup, every
from tenantry.leases.model import (
    Lease,
    LeaseConfig,
    PoolKey,
    fit_time,
    pilot_script,
    pythonpath_of_package,
)
from tenantry.leases.pilot import protocol as p
from tenantry.leases.pilots import PilotLinks
from tenantry.leases.routing import route
from tenantry.leases.state import Cmd, Live, Sink, Tail, fail, key_hex
from tenantry.leases.store import LeaseStore
from tenantry.store.engine import Store

# environments whose id is kept (the key is the environment itself)
ENV_IDS = 256

log = logging.getLogger(__name__)


def _waiting_beyond(q: deque[Cmd], n: int) -> bool:
    """Whether more than ``n`` commands of ``q`` still wait (looks at about ``n`` of them:
    the pump calls this with every queued command of a burst)."""
    for cmd in q:
        if not cmd.future.done():
            n -= 1
            if n < 0:
                return True
    return False


class LeaseManager(PilotLinks):
    """The ``leases`` component. ``run`` has the command-runner signature."""

    def __init__(
        self,
        settings: Settings,
        backend: Backend,
        bus: Bus | None = None,
        config: LeaseConfig | None = None,
        *,
        python: str = sys.executable,
        store: Store | Path | None = None,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.bus = bus
        self.cfg = config or LeaseConfig.from_settings(settings)
        self.python = python
        self.dir = settings.state_path / "leases"
        # the daemon's store; alone (tests, tools): a file of its own
        self.store = LeaseStore(store or settings.state_path / "leases.sqlite3")
        self.address: tuple[str, int] = (self.cfg.listen_host, 0)
        self._live: dict[str, Live] = {}
        self._env_ids: dict[tuple[tuple[str, str], ...], str] = {}  # environment -> its id
        self._queues: dict[PoolKey, deque[Cmd]] = {}
        self._server: asyncio.Server | None = None
        self._tasks = TaskGroup("leases")  # failures logged and shown in info
        self._reaper: asyncio.Task[None] | None = None
        self._closing = False

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        await self.store.start()
        for lease in await self.store.active():
            live = Live(lease)
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
        # what pilots dial: a wildcard listen address is advertised as this host's name
        host = self.cfg.listen_host
        if host in ("0.0.0.0", "::", ""):
            host = socket.getfqdn()
        self.address = (host, int(sock[1]))
        await self.store.set_meta("port", str(self.address[1]))
        self._reaper = asyncio.create_task(every(self.cfg.tick_s, self.reap, log, "lease reaper"))

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
                fail(cmd, Unavailable("the daemon stopped while the command ran"))
        for q in self._queues.values():
            for cmd in q:
                fail(cmd, Unavailable("the daemon stopped before the command started"))
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
        cmd = Cmd(
            id=cid or f"c-{secrets.token_hex(6)}",
            spec=spec,
            principal=principal,
            sink=sink,
            key=PoolKey.of(principal, spec.resources, self.settings),
            future=asyncio.get_running_loop().create_future(),
            out=Tail(cap),
            err=Tail(cap),
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

    def _orphan(self, cid: str, lease: Lease) -> Cmd:
        async def drop(stream: str, data: bytes) -> None:
            return None

        cap = self.cfg.output_cap_bytes
        return Cmd(
            id=cid,
            spec=CommandSpec(argv=("?",)),
            principal=Principal(uid=lease.uid, user=lease.key.user),
            sink=drop,
            key=lease.key,
            future=asyncio.get_running_loop().create_future(),
            out=Tail(cap),
            err=Tail(cap),
            lease=lease.id,
            orphan=True,
        )

    def _abandon(self, cmd: Cmd) -> None:
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

    def _pick(self, key: PoolKey, cmd: Cmd) -> Live | None:
        best: Live | None = None
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

    def _dispatch(self, live: Live, cmd: Cmd) -> None:
        self._account(live)
        cmd.attempts += 1
        cmd.lease = live.lease.id
        live.running[cmd.id] = cmd
        spec = cmd.spec
        env_id = self._env_on(live, spec.env) if spec.env else ""
        self._send(
            live,
            p.Run(
                id=cmd.id,
                argv=tuple(spec.argv),
                cwd=spec.cwd,
                env={} if env_id else dict(spec.env),
                timeout_s=spec.timeout_s or self.settings.command_timeout_s,
                env_id=env_id,
            ),
        )

    def _env_on(self, live: Live, env: dict[str, str]) -> str:
        """The id of ``env`` on this lease's link, sent first if the pilot lacks it."""
        key = tuple(env.items())
        env_id = self._env_ids.get(key)
        if env_id is None:
            if len(self._env_ids) >= ENV_IDS:
                self._env_ids.clear()
            env_id = self._env_ids[key] = env_digest(env)[:32]
        if env_id not in live.envs:
            self._send(live, p.Env(id=env_id, env=dict(env)))
            live.envs[env_id] = None
            while len(live.envs) > p.ENVS_KEPT:  # as the pilot drops them
                del live.envs[next(iter(live.envs))]
        return env_id

    def _grow(self, key: PoolKey, q: deque[Cmd]) -> None:
        pool = [lv for lv in self._live.values() if lv.lease.key == key and lv.lease.active]
        # starting pilots, and pilots that are expected back (daemon restart, blip)
        coming = sum(lv.lease.slots for lv in pool if lv.lease.state in ("pending", "disconnected"))
        owner = q[0].principal  # the pump leaves a command still waiting first
        while _waiting_beyond(q, coming):
            user_n = sum(
                1 for lv in self._live.values() if lv.lease.active and lv.lease.key.user == key.user
            )
            sess_n = sum(
                1 for lv in self._live.values() if lv.lease.active and lv.lease.owner == owner.key
            )
            if user_n >= self.cfg.max_per_user or sess_n >= self.cfg.max_per_session:
                self._make_room(key, q, pool, user_n, sess_n)
                return
            self._acquire(key, owner, max(c.need_s for c in q if not c.future.done()))
            coming += self.slots_for(key)

    def _make_room(
        self, key: PoolKey, q: deque[Cmd], pool: list[Live], user_n: int, sess_n: int
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
        owner = q[0].principal.key
        if any(
            lv.lease.state == "draining"
            and (lv.lease.key.user == key.user if which == "user" else lv.lease.owner == owner)
            for lv in self._live.values()
        ):
            return  # a lease counted against the cap is ending (released, walltime): room comes
        limit = self.cfg.max_per_user if which == "user" else self.cfg.max_per_session
        err = LeaseCapReached(
            f"{which} already holds {limit} busy lease(s), the most allowed",
            hint="wait for running commands to finish, or `tenantry leases release ID`",
        )
        for cmd in [c for c in q if not c.future.done()]:
            fail(cmd, err)

    def slots_for(self, key: PoolKey) -> int:
        """Command slots of a new lease of this pool.

        A GPU pool gets one slot per lease: a lease holds slots x GPUs, so a
        spare slot would keep a GPU allocated and unused for as long as the
        other slot is busy, out of reach of the idle release. With one slot
        each lease holds what one command needs and is released once idle.
        """
        return 1 if key.gpus else self.cfg.slots

    def _acquire(self, key: PoolKey, owner: Principal, need_s: float) -> None:
        secret = secrets.token_urlsafe(32)
        lease = Lease(
            id=f"l-{secrets.token_hex(4)}",
            key=key,
            uid=owner.uid,
            owner=owner.key,
            secret_hash=key_hex(secret),
            backend=self.backend.name,
            slots=self.slots_for(key),
        )
        live = Live(lease, secret=secret)
        self._live[lease.id] = live
        self._spawn(self._submit(live, owner, need_s))

    async def _submit(self, live: Live, owner: Principal, need_s: float) -> None:
        lease = live.lease
        need = need_s + self.cfg.drain_s + 1
        time_s = int(max(self.cfg.time_s, need))
        try:  # within the partition's MaxTime, or sbatch refuses the pilot job
            partitions = (await self.backend.info()).get("partitions") or []
            time_s = fit_time(time_s, need, lease.key.partition, partitions)
        except TenantryError as exc:
            log.info("lease %s: partition limits unknown (%s); asking %d s", lease.id, exc, time_s)
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
            # no secret in the job's environment: Slurm keeps job environments
            # (scontrol, accounting with job_env) and /proc/<pid>/environ shows
            # them to any process of the user; the pilot reads the 0600 file,
            # which lives in the state directory that sandboxes cannot see
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
                fail(cmd, err)
            return
        lease.backend_id = sub.backend_id
        await self.store.save(lease)
        await self._emit(
            EventType.LEASE_REQUESTED,
            lease,
            data={"backend_id": sub.backend_id, "pool": lease.key.label(), "slots": lease.slots},
        )

    async def _lose(self, live: Live, reason: str) -> None:
        victims: list[Cmd] = []
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

    async def _end(self, live: Live, state: str, reason: str, **data: Any) -> None:
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
                fail(cmd, err)
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
    def _account(self, live: Live) -> None:
        lease = live.lease
        now = time.monotonic()
        if lease.state in ("ready", "draining") and live.writer is not None:
            free = max(0, lease.slots - len(live.running))
            lease.idle_core_s += free * lease.key.cpus * max(0.0, now - lease.accounted_at)
        lease.accounted_at = now

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
                fail(
                    cmd,
                    Unavailable(
                        f"no lease became ready within {self.cfg.start_timeout_s:.0f} s",
                        hint="the scheduler may be busy; try --where local or later",
                    ),
                )
        self._pump()

    def _spawn(self, coro: Awaitable[Any]) -> None:
        self._tasks.spawn(coro)

    async def _emit(self, kind: EventType, lease: Lease, *, subject: str = "", **kw: Any) -> None:
        if self.bus is not None:
            await self.bus.publish(
                Event(kind, principal=lease.owner, subject=subject or lease.id, **kw)
            )

    # -- views -----------------------------------------------------------------------------
    def describe(self, live: Live) -> dict[str, Any]:
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
