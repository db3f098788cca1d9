"""Where a command runs, decided by Tenantry: the login node or a lease. Pure: no I/O.

The login node runs only the facility's allow-list of cheap commands
(``login_node_commands``: basenames, ``*`` for all) asking for at most one CPU
and no GPU. For an agent, ``where`` is a preference: when the login node is
enforced (``login_node_policy``), an agent command off the allow-list goes to a
lease whatever it asked for, or is refused when no lease manager runs. A
human's explicit ``where`` is honoured. ``auto`` sends off-list commands to a
lease with the Slurm backend and runs everything on this host with the embedded
backends (a lease would be a local process too).

The ``location`` (``login`` or ``lease``) is what the policy context carries as
``context.where``, so a rule can tell the two apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tenantry.core.errors import PolicyDenied, UsageError
from tenantry.core.models import CommandSpec
from tenantry.core.settings import Settings

Where = Literal["local", "lease"]
EMBEDDED = frozenset({"local", "fake"})  # backends whose leases are local processes


@dataclass(frozen=True, slots=True)
class Placement:
    where: Where  # how it runs: the local runner or a lease
    location: str  # login | lease: what policy sees as context.where
    note: str = ""  # why an agent's preference was overridden


def login_node_allowed(settings: Settings) -> frozenset[str]:
    return frozenset(x.strip() for x in settings.login_node_commands.split(",") if x.strip())


def program_of(spec: CommandSpec) -> str:
    return spec.argv[0].rsplit("/", 1)[-1] if spec.argv else ""


def login_ok(spec: CommandSpec, settings: Settings) -> bool:
    """Cheap enough for the login node: on the allow-list, one CPU at most, no GPU."""
    res = spec.resources
    if res.gpus or (res.cpus or 1) > 1:
        return False
    allowed = login_node_allowed(settings)
    return "*" in allowed or program_of(spec) in allowed


def enforced(settings: Settings, backend: str) -> bool:
    """Does the allow-list bind agents? ``auto``: with a scheduler, not on the embedded backends."""
    mode = settings.login_node_policy.strip().lower()
    if mode == "enforce":
        return True
    if mode == "off":
        return False
    return backend not in EMBEDDED


def requested(spec: CommandSpec) -> str:
    where = (spec.where or "auto").strip().lower()
    if where not in {"auto", "local", "lease"}:
        raise UsageError(f"where={spec.where!r} is not one of auto, local, lease")
    return where


def place(
    spec: CommandSpec, *, agent: bool, settings: Settings, backend: str, leases: bool
) -> Placement:
    """Where ``spec`` runs (raises ``PolicyDenied`` when an agent's command may run nowhere)."""
    where = requested(spec)
    if where == "lease":
        if not leases:
            raise UsageError("no lease manager runs in this daemon", hint="use where=local or auto")
        return Placement("lease", "lease")
    if agent and enforced(settings, backend) and not login_ok(spec, settings):
        prog = program_of(spec)
        if not leases:
            raise PolicyDenied(
                f"{prog!r} may not run on the login node: only the facility's cheap commands "
                "(login_node_commands) run there, and no lease manager runs in this daemon",
                hint="submit it as a batch job (tenantry submit) or ask the facility to run leases",
            )
        note = ""
        if where == "local":
            note = (
                f"{prog!r} is not on the login node's allow-list (login_node_commands) or asks "
                "for more than one CPU: it ran on a lease instead"
            )
        return Placement("lease", "lease", note)
    if where == "local" or not leases or backend in EMBEDDED:
        return Placement("local", "login")
    return Placement("local", "login") if login_ok(spec, settings) else Placement("lease", "lease")
