"""Where a command runs: on the login node (``local``) or on a lease.

``where=local|lease`` is the caller's explicit choice. ``auto`` runs a command
locally only when its program is listed in the ``login_node_commands`` setting
(comma-separated basenames; ``*`` allows all) and it asks for no more than one
CPU and no GPU; everything else goes to a lease. Pure: no I/O.
"""

from __future__ import annotations

from typing import Literal

from tenantry.errors import UsageError
from tenantry.models import CommandSpec
from tenantry.settings import Settings

Where = Literal["local", "lease"]


def login_node_allowed(settings: Settings) -> frozenset[str]:
    return frozenset(x.strip() for x in settings.login_node_commands.split(",") if x.strip())


def route(spec: CommandSpec, settings: Settings) -> Where:
    """``local`` or ``lease`` for this command."""
    where = (spec.where or "auto").strip().lower()
    if where == "local":
        return "local"
    if where == "lease":
        return "lease"
    if where != "auto":
        raise UsageError(f"where={spec.where!r} is not one of auto, local, lease")
    res = spec.resources
    if res.gpus or (res.cpus or 1) > 1:
        return "lease"
    allowed = login_node_allowed(settings)
    program = spec.argv[0].rsplit("/", 1)[-1] if spec.argv else ""
    if "*" in allowed or program in allowed:
        return "local"
    return "lease"
