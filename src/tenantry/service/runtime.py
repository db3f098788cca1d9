"""The running daemon's parts, handed to every op as ``ctx.runtime``.

Core parts (settings, journal, bus, backend) are set when the runtime opens.
Long-lived concepts (lease manager, memory, index, policy, ...) are
*components*: objects with ``async start()`` and ``async aclose()``, created by
a factory listed in ``tenantry.gateway.app.COMPONENTS``. A concept's own ops
find its component with ``ctx.runtime.component("name", Type)``; another
concept reaches it only through a typed slot below, filled by the providing
component's factory (see ``tenantry.service.seams``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from tenantry.core.errors import Unavailable
from tenantry.core.events import Bus, Event
from tenantry.core.settings import Settings
from tenantry.service.seams import (
    CommandRunner,
    Component,
    FlagSink,
    Gate,
    LeaseRunner,
    LessonSource,
    OpForwarder,
    PrincipalResolver,
    Sandboxes,
    StatusSource,
    StopCheck,
)

if TYPE_CHECKING:
    from pathlib import Path

    from tenantry.backends.base import Backend
    from tenantry.store.engine import Schema, Store
    from tenantry.store.journal import Journal

__all__ = ["GATE_ORDER", "Component", "Runtime"]

T = TypeVar("T")

# Gates run in this order before every op; gates of other names run before "audit",
# which records only requests every other gate let through. "facility" is first: on
# the facility service it refuses the ops the service does not serve; on a user's
# executor it is the service's decision. "slurm-accounts" (the facility service's check of a
# claimed account against Slurm's associations) refuses before budgets charge.
GATE_ORDER: tuple[str, ...] = ("facility", "kill", "policy", "slurm-accounts", "budgets")
LAST_GATES: tuple[str, ...] = ("audit",)


class Runtime:
    def __init__(self, settings: Settings, journal: Journal, bus: Bus, backend: Backend) -> None:
        self.settings = settings
        self.journal = journal
        self.bus = bus
        self.backend = backend
        self.components: dict[str, Component] = {}
        # typed slots: filled by the component that provides them, read by the others
        self.gates: dict[str, Gate] = {}
        self.runner: CommandRunner | None = None
        self.leases: LeaseRunner | None = None
        self.lessons: LessonSource | None = None
        self.budgets: StatusSource | None = None
        self.flags: FlagSink | None = None
        self.stops: StopCheck | None = None
        self.sandboxes: Sandboxes | None = None
        # facility mode: who the callers are (the service) and where decisions go (executor)
        self.identify: PrincipalResolver | None = None
        self.forwarder: OpForwarder | None = None

    @property
    def store(self) -> Store:
        """The daemon's one database: every concept's repository migrates into it."""
        return self.journal.db

    def store_for(self, schema: Schema) -> Store | Path:
        """Where a concept keeps its tables: the daemon's store, or (a runtime
        without a journal: unit tests) a SQLite file of its own in the state directory."""
        if self.journal is not None:
            return self.journal.db
        return self.settings.state_path / (schema.legacy_file or f"{schema.concept}.sqlite3")

    def component(self, name: str, kind: type[T]) -> T:
        comp = self.components.get(name)
        if comp is None:
            raise Unavailable(f"the {name} service is not running in this daemon")
        if not isinstance(comp, kind):
            raise TypeError(f"component {name} is {type(comp).__name__}, not {kind.__name__}")
        return comp

    def ordered_gates(self) -> list[Gate]:
        """The gates to run before an op, in ``GATE_ORDER``, others next, ``audit`` last."""
        fixed = GATE_ORDER + LAST_GATES
        first = [self.gates[n] for n in GATE_ORDER if n in self.gates]
        middle = [g for n, g in self.gates.items() if n not in fixed]
        last = [self.gates[n] for n in LAST_GATES if n in self.gates]
        return first + middle + last

    async def emit(self, event: Event) -> None:
        await self.bus.publish(event)
