"""The audit component: every bus event and every explicit decision, chained.

``create(runtime)`` builds it; ``start()`` opens the log (resuming the chain
from its anchor) and subscribes to the bus, so every event of every principal
becomes a record. Decisions the bus does not carry (policy, budgets, guard,
admin) are added with ``await audit.record(...)``. Inputs are stored only as
digests: secrets never land in the audit log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenantry.audit.chain import KEY_NAME, ChainWriter, digest, load_key
from tenantry.events import Event
from tenantry.gateway.runtime import Runtime
from tenantry.models import Principal
from tenantry.settings import Settings


def audit_paths(settings: Settings) -> tuple[Path, Path | None]:
    """(log directory, key file or None for a plain SHA-256 chain)."""
    directory = Path(settings.audit_dir) if settings.audit_dir else settings.state_path / "audit"
    if settings.audit_key_file == "none":
        return directory, None
    key = Path(settings.audit_key_file) if settings.audit_key_file else directory / KEY_NAME
    return directory, key


class AuditLog:
    def __init__(self, runtime: Runtime, *, fsync: bool = True) -> None:
        self.runtime = runtime
        self.fsync = fsync
        self.dir, self.key_path = audit_paths(runtime.settings)
        self._writer: ChainWriter | None = None
        self._lock = asyncio.Lock()
        self._unsubscribe: Callable[[], None] | None = None

    async def start(self) -> None:
        def open_writer() -> ChainWriter:
            key = load_key(self.key_path, create=True) if self.key_path else None
            writer = ChainWriter(self.dir, key)
            writer.open()
            return writer

        self._writer = await asyncio.to_thread(open_writer)
        self._unsubscribe = self.runtime.bus.subscribe(self._on_event)

    async def aclose(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        async with self._lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    async def _on_event(self, event: Event) -> None:
        data = event.data or {}
        await self._append(
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
        """Per-request hook, run after the checks passed: one record per allowed request."""
        await self.record(principal, f"op:{op_name}", params, "allow", action or "")
        return []

    async def record(
        self,
        principal: Principal | str,
        action: str,
        input: Any,
        decision: str,
        rule: str = "",
        subject: str = "",
    ) -> dict[str, Any]:
        """Append one decision or action; ``input`` is stored as a digest only."""
        key = principal.key if isinstance(principal, Principal) else principal
        return await self._append(
            {
                "principal": key,
                "action": action,
                "subject": subject,
                "decision": decision,
                "rule": rule,
                "input_digest": digest(input),
            }
        )

    async def _append(self, fields: dict[str, Any]) -> dict[str, Any]:
        async with self._lock:
            writer = self._writer
            if writer is None:
                return {}
            return await asyncio.to_thread(writer.append, fields, fsync=self.fsync)


def create(runtime: Runtime) -> AuditLog:
    return AuditLog(runtime)
