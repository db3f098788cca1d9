"""The audit component: every bus event and every explicit decision, chained.

``create(runtime)`` builds it; ``start()`` opens the log (resuming the chain
from its anchor) and subscribes to the bus, so every event of every principal
becomes a record. Decisions the bus does not carry (policy, budgets, guard,
admin) are added with ``await audit.record(...)``. Inputs are stored only as
digests: secrets never land in the audit log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenantry.core.errors import AuditUnavailable
from tenantry.core.events import Event
from tenantry.core.models import Principal
from tenantry.core.settings import Settings
from tenantry.safety.audit.anchorlog import AnchorLog
from tenantry.safety.audit.chain import KEY_NAME, ChainWriter, digest, load_key
from tenantry.service.ops import defer_until_reply
from tenantry.service.runtime import Runtime

log = logging.getLogger(__name__)


def audit_paths(settings: Settings) -> tuple[Path, Path | None]:
    """(log directory, key file or None for a plain SHA-256 chain)."""
    directory = Path(settings.audit_dir) if settings.audit_dir else settings.state_path / "audit"
    if settings.audit_key_file == "none":
        return directory, None
    key = Path(settings.audit_key_file) if settings.audit_key_file else directory / KEY_NAME
    return directory, key


# a bus event's record waits at most this long for a gated request to share its batch
LINGER_S = 0.05
# environments whose digest is kept (see AuditLog._env_digest)
ENV_DIGESTS = 256


class _Waiter:
    """A queued record somebody waits for: once written, and once durable."""

    __slots__ = ("durable", "written")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.written: asyncio.Future[dict[str, Any]] = loop.create_future()
        self.durable: asyncio.Future[dict[str, Any]] = loop.create_future()

    def fail(self, err: BaseException, *, written: bool) -> None:
        for fut in (self.durable,) if written else (self.written, self.durable):
            if not fut.done():
                fut.set_exception(err)
                fut.exception()  # retrieved: whoever waits still gets it


_Pending = tuple[dict[str, Any], _Waiter | None]


class AuditLog:
    """Appends records through one background writer (group commit).

    Bus events and gate records are written in batches -- one write, one
    fsync, one anchor update per batch -- so publishing an event never waits
    for the disk. A record somebody waits for starts a batch at once:
    ``record()`` returns once it is durable; the gate lets its op start once
    the record is written and holds the request's answer until it is durable
    (``tenantry.service.ops.ReplyBarrier``). A bus event's record, which
    nobody waits for, joins the next such batch or is written ``LINGER_S``
    after it was published, whichever comes first.
    """

    def __init__(self, runtime: Runtime, *, fsync: bool = True) -> None:
        self.runtime = runtime
        self.fsync = fsync
        self.dir, self.key_path = audit_paths(runtime.settings)
        self._writer: ChainWriter | None = None
        self._pending: list[_Pending] = []
        self._wake = asyncio.Event()
        self._linger: asyncio.TimerHandle | None = None
        self._closing = False
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._envs: dict[int, tuple[dict[str, Any], str]] = {}
        self.anchors: AnchorLog | None = None

    async def start(self) -> None:
        def open_writer() -> ChainWriter:
            key = load_key(self.key_path, create=True) if self.key_path else None
            writer = ChainWriter(self.dir, key)
            writer.open()
            if self.runtime.settings.audit_syslog:
                self.anchors = AnchorLog()
                writer.on_anchor = self.anchors
            return writer

        self._writer = await asyncio.to_thread(open_writer)
        self._closing = False
        self._task = asyncio.get_running_loop().create_task(self._drain())
        self._unsubscribe = self.runtime.bus.subscribe(self._on_event)

    async def aclose(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._task is not None:
            self._closing = True
            self._wake.set()
            await self._task
            self._task = None
        if self._linger is not None:
            self._linger.cancel()
            self._linger = None
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self.anchors is not None:
            self.anchors.close()
            self.anchors = None

    async def _drain(self) -> None:
        writer = self._writer
        assert writer is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            if self._linger is not None:
                self._linger.cancel()
                self._linger = None
            work, self._pending = self._pending, []
            if work:
                await self._write(writer, work)
            if self._closing and not self._pending:
                return

    async def _write(self, writer: ChainWriter, work: list[_Pending]) -> None:
        # the write (hashing, one ``write`` into the page cache) here, the fsync in
        # a thread: a gate lets its op start once its record is written, and the
        # request's answer waits until it is durable
        try:
            records = writer.write_many([f for f, _ in work])
        except OSError as exc:  # fail closed: gated actions are refused until it works
            self._failed(exc, work, written=False)
            return
        for (_, waiter), rec in zip(work, records, strict=True):
            if waiter is not None and not waiter.written.done():
                waiter.written.set_result(rec)
        try:
            await asyncio.to_thread(writer.sync, fsync=self.fsync)
        except OSError as exc:
            self._failed(exc, work, written=True)
            return
        for (_, waiter), rec in zip(work, records, strict=True):
            if waiter is not None and not waiter.durable.done():
                waiter.durable.set_result(rec)

    def _failed(self, exc: OSError, work: list[_Pending], *, written: bool) -> None:
        log.error("audit log write failed: %s", exc)
        err = AuditUnavailable(
            f"the audit log cannot be written ({exc.strerror or exc}): the action is"
            " refused, since it could not be recorded",
            hint=f"free space or fix {self.dir}; Tenantry recovers by itself",
        )
        for _, waiter in work:
            if waiter is not None:
                waiter.fail(err, written=written)

    def _enqueue(self, fields: dict[str, Any]) -> _Waiter:
        """Queue a record someone waits for: its batch starts now."""
        waiter = _Waiter(asyncio.get_running_loop())
        if self._task is None:
            waiter.written.set_result({})
            waiter.durable.set_result({})
            return waiter
        self._pending.append((fields, waiter))
        self._wake.set()
        return waiter

    def _enqueue_later(self, fields: dict[str, Any]) -> None:
        """Queue a record nobody waits for: written with the next batch, within ``LINGER_S``."""
        if self._task is None:
            return
        self._pending.append((fields, None))
        if self._linger is None and not self._wake.is_set():
            self._linger = asyncio.get_running_loop().call_later(LINGER_S, self._wake.set)

    async def _on_event(self, event: Event) -> None:
        data = event.data or {}
        self._enqueue_later(
            {
                "principal": event.principal,
                "action": event.type.value,
                "subject": event.subject,
                "decision": event.outcome,
                "rule": str(data.get("rule", "")),
                "input_digest": digest(data),
            }
        )

    async def gate(
        self, principal: Principal, op_name: str, action: str | None, params: dict[str, Any]
    ) -> list[str]:
        """Per-request hook, run after the checks passed: one record per allowed request.

        The op runs once its record is written (it survives the daemon being
        killed); the answer to the request is sent once the record is durable
        (``fsync``). An action that cannot be recorded is refused
        (``AuditUnavailable``). Outside the HTTP endpoint (no reply barrier)
        the gate waits until the record is durable.
        """
        env = params.get("env")
        if isinstance(env, dict) and env:
            # the environment (a few KiB, the same for a whole session) by its own digest
            params = {**params, "env": self._env_digest(env)}
        waiter = self._enqueue(
            _fields(principal, f"op:{op_name}", params, "allow", action or "", "")
        )
        await waiter.written
        if not defer_until_reply(waiter.durable):
            await waiter.durable
        return []

    def _env_digest(self, env: dict[str, Any]) -> str:
        """``digest(env)``, computed once per environment object the daemon holds.

        The request path hands every request of a session the same stored
        environment (``gateway/envs.py``), which nobody changes; the entry keeps
        the object alive, so its ``id`` is not reused while it is cached.
        """
        hit = self._envs.get(id(env))
        if hit is not None and hit[0] is env:
            return hit[1]
        value = digest(env)
        if len(self._envs) >= ENV_DIGESTS:
            self._envs.clear()
        self._envs[id(env)] = (env, value)
        return value

    async def record(
        self,
        principal: Principal | str,
        action: str,
        input: Any,
        decision: str,
        rule: str = "",
        subject: str = "",
    ) -> dict[str, Any]:
        """Append one decision or action and wait until it is durable; ``input`` as a digest."""
        return await self._enqueue(
            _fields(principal, action, input, decision, rule, subject)
        ).durable


def _fields(
    principal: Principal | str, action: str, input: Any, decision: str, rule: str, subject: str
) -> dict[str, Any]:
    return {
        "principal": principal.key if isinstance(principal, Principal) else principal,
        "action": action,
        "subject": subject,
        "decision": decision,
        "rule": rule,
        "input_digest": digest(input),
    }


def create(runtime: Runtime) -> AuditLog:
    audit = AuditLog(runtime)
    runtime.gates["audit"] = audit
    return audit
