"""The ``leases`` component factory, listed in ``gateway.app.COMPONENTS``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tenantry.leases.manager import LeaseManager
from tenantry.leases.store import SCHEMA

if TYPE_CHECKING:
    from tenantry.service.runtime import Runtime

__all__ = ["LeaseManager", "create"]


def create(runtime: Runtime) -> LeaseManager:
    """A lease manager on the runtime's backend; ``start()`` opens its listener."""
    store = runtime.store_for(SCHEMA)
    manager = LeaseManager(runtime.settings, runtime.backend, runtime.bus, store=store)
    runtime.leases = manager
    return manager
