"""The typed seams between concepts: one small Protocol per cross-concept call.

A concept that calls into another never looks it up by name: it reads a typed
slot of the ``Runtime`` (``rt.leases``, ``rt.lessons``, ...) whose type is one
of these Protocols, and the concept that provides it fills the slot in its
component factory. The type checker therefore sees both sides of every seam.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any, Protocol

from tenantry.core.models import CommandResult, CommandSpec, Principal

# Receives one chunk of a command's output: (stream name, bytes).
Sink = Callable[[str, bytes], Awaitable[None]]

__all__ = [
    "CommandRunner",
    "Component",
    "Gate",
    "LeaseRunner",
    "LessonSource",
    "OpForwarder",
    "PrincipalResolver",
    "StatusSource",
    "StopCheck",
]


class Component(Protocol):
    """A long-lived part of the daemon, started after the core and closed in reverse."""

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


class Gate(Protocol):
    """Runs before every op; may refuse (raise) or return warnings for the caller."""

    async def gate(
        self, principal: Principal, op_name: str, action: str | None, params: dict[str, Any]
    ) -> list[str]: ...


class CommandRunner(Protocol):
    """Runs commands on this host (the local runner)."""

    async def run(
        self, spec: CommandSpec, principal: Principal, sink: Sink, cid: str | None = None
    ) -> CommandResult: ...

    async def kill_principal(self, key: str) -> int:
        """End every running command of ``key``; return how many."""
        ...


class LeaseRunner(Protocol):
    """Runs commands on warm leases (the lease manager)."""

    async def run(
        self, spec: CommandSpec, principal: Principal, sink: Sink, cid: str | None = None
    ) -> CommandResult: ...

    def route(self, spec: CommandSpec) -> str:
        """``local`` or ``lease`` for a command sent with ``where=auto``."""
        ...

    async def drain_principal(self, key: str) -> int:
        """Stop ``key``'s commands and release its leases; return how many."""
        ...


class LessonSource(Protocol):
    """Facility-memory lessons that match a failure's error text (the memory)."""

    async def lessons_for_failure(
        self, principal: Principal, text: str, limit: int = 3
    ) -> list[dict[str, Any]]: ...


class StatusSource(Protocol):
    """Per-principal status rows for the dashboard (the budgets)."""

    async def status(self, principal: Principal) -> list[dict[str, Any]]: ...


class StopCheck(Protocol):
    """Whether an operator stopped a principal (the kill switch), asked again once a
    command that passed the gates has started, so a stop landing between the two
    still ends it."""

    def stopped(self, principal: Principal) -> object | None: ...


class FlagSink(Protocol):
    """Told when a session received instruction-like content, so what it does next is held."""

    def note_flagged(self, principal: Principal) -> None: ...


class SandboxView(Protocol):
    """What other concepts read of one sandboxed agent session."""

    @property
    def id(self) -> str: ...

    @property
    def agent(self) -> str: ...

    @property
    def state(self) -> str: ...


class Sandboxes(Protocol):
    """The registry of sandboxed sessions: confines their commands, ends their trees."""

    def confine(self, spec: CommandSpec, p: Principal, where: str = "local") -> CommandSpec: ...

    async def kill_principal(self, key: str) -> int:
        """End every sandbox of the principal ``key``; return how many."""
        ...

    def list(self) -> Sequence[SandboxView]: ...


class PrincipalResolver(Protocol):
    """Who is calling, from the connection (facility mode: any uid, proven by the socket).

    When the slot is empty the daemon serves its own uid only (user mode).
    """

    async def principal(self, scope: MutableMapping[str, Any], raw_claims: str) -> Principal: ...

    def sees_everyone(self, p: Principal) -> bool:
        """Whether ``p`` may read every user's telemetry (staff as humans, the service)."""
        ...


class OpForwarder(Protocol):
    """Sends the ops whose state another service owns to it (facility mode's executor)."""

    def forwards(self, op_name: str) -> bool: ...

    async def forward(
        self, principal: Principal, op_name: str, params: dict[str, Any], request_id: str
    ) -> tuple[Any, list[str]]:
        """The op's result and warnings, as the owning service answered them."""
        ...
