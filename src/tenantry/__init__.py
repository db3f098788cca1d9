"""Tenantry: coding agents as first-class, facility-aware tenants of HPC systems.

The public API is deliberately small; most use goes through the daemon
(``tenantry serve``), the CLI and the MCP server. Names load lazily so the
CLI client starts fast.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: the client path avoids importing typing
if TYPE_CHECKING:
    from tenantry.core.errors import TenantryError
    from tenantry.core.models import (
        AgentProduct,
        CommandResult,
        CommandSpec,
        Job,
        JobSpec,
        JobState,
        Principal,
        Resources,
    )

__version__ = "0.1.0"

_LAZY = {
    "TenantryError": "tenantry.core.errors",
    "AgentProduct": "tenantry.core.models",
    "CommandResult": "tenantry.core.models",
    "CommandSpec": "tenantry.core.models",
    "Job": "tenantry.core.models",
    "JobSpec": "tenantry.core.models",
    "JobState": "tenantry.core.models",
    "Principal": "tenantry.core.models",
    "Resources": "tenantry.core.models",
}

__all__ = [
    "AgentProduct",
    "CommandResult",
    "CommandSpec",
    "Job",
    "JobSpec",
    "JobState",
    "Principal",
    "Resources",
    "TenantryError",
    "__version__",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tenantry' has no attribute {name!r}")
    import importlib  # here, not at the top: every cold CLI start imports this package

    return getattr(importlib.import_module(module), name)
