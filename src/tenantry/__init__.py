"""Tenantry: coding agents as first-class, facility-aware tenants of HPC systems.

The public API is deliberately small; most use goes through the daemon
(``tenantry serve``), the CLI and the MCP server.
"""

from tenantry.errors import TenantryError
from tenantry.models import (
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
