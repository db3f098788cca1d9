"""Where a command runs: on the login node (``local``) or on a lease.

``where=local|lease`` is the caller's explicit choice. ``auto`` runs a command
locally only when it is cheap enough for the login node (its program is listed
in the ``login_node_commands`` setting, it asks for at most one CPU and no
GPU); everything else goes to a lease. The full decision, with agents'
``where`` as a preference only, is ``tenantry.service.placement.place``. Pure.
"""

from __future__ import annotations

from tenantry.core.models import CommandSpec
from tenantry.core.settings import Settings
from tenantry.service.placement import Where, login_node_allowed, login_ok, requested

__all__ = ["Where", "login_node_allowed", "route"]


def route(spec: CommandSpec, settings: Settings) -> Where:
    """``local`` or ``lease`` for this command."""
    where = requested(spec)
    if where == "local":
        return "local"
    if where == "lease":
        return "lease"
    return "local" if login_ok(spec, settings) else "lease"
