"""Plan and apply an install or uninstall for one agent and scope."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tenantry.agents import files
from tenantry.agents.products import MODULES, module
from tenantry.agents.products.common import Target
from tenantry.core.errors import UsageError


@dataclass(frozen=True, slots=True)
class Plan:
    agent: str
    scope: str
    changes: list[files.Change]

    @property
    def pending(self) -> list[files.Change]:
        return [c for c in self.changes if c.changed]

    def diff(self) -> str:
        return "".join(c.diff() for c in self.pending)


def target(
    scope: str,
    project: str | None = None,
    *,
    home: str | None = None,
    root: str | None = None,
    exe: tuple[str, ...] = (),
    hook_http: str = "",
) -> Target:
    return Target(
        scope=scope,
        home=Path(home or os.environ.get("HOME") or Path.home()),
        project=Path(project).resolve() if project else Path.cwd(),
        root=Path(root or "/"),
        exe=exe,
        hook_http=hook_http,
    )


def plan(agent: str, t: Target, *, remove: bool = False) -> Plan:
    if agent not in MODULES:
        raise UsageError(f"unknown agent {agent!r}", hint=f"one of: {', '.join(MODULES)}")
    mod = module(agent)
    changes = mod.uninstall(t) if remove else mod.install(t)
    return Plan(agent, t.scope, changes)
