"""The running daemon's parts, handed to every op as ``ctx.runtime``.

Concepts that need long-lived state (lease manager, memory, index, policy)
are *components*: objects with ``async start()`` and ``async aclose()``,
created by a factory listed in ``tenantry.gateway.app.COMPONENTS`` and found
by ops with ``ctx.runtime.component("name", Type)``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from tenantry.events import Bus, Event
from tenantry.settings import Settings

if TYPE_CHECKING:
    from tenantry.backends.base import Backend
    from tenantry.store.journal import Journal

T = TypeVar("T")


class Component(Protocol):
    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


class Runtime:
    def __init__(self, settings: Settings, journal: Journal, bus: Bus, backend: Backend) -> None:
        self.settings = settings
        self.journal = journal
        self.bus = bus
        self.backend = backend
        self.components: dict[str, Any] = {}

    def component(self, name: str, kind: type[T]) -> T:
        comp = self.components.get(name)
        if comp is None:
            from tenantry.errors import Unavailable

            raise Unavailable(f"the {name} service is not running in this daemon")
        if not isinstance(comp, kind):
            raise TypeError(f"component {name} is {type(comp).__name__}, not {kind.__name__}")
        return comp

    async def emit(self, event: Event) -> None:
        await self.bus.publish(event)
