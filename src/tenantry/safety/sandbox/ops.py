"""Ops of sandboxed agent sessions: register, attach, end, list.

Only the user's own socket (``origin == "user"``) may register, attach or end
a session: a sandboxed agent cannot start a fresh session to shed its
identity, nor end or resume its own.
"""

from __future__ import annotations

import os
from typing import Any

from tenantry.client.principal import PRODUCTS
from tenantry.core.events import Event, EventType
from tenantry.safety.sandbox.registry import SandboxRegistry, inside_runtime
from tenantry.service.ops import OpContext, op, param


def _registry(ctx: OpContext) -> SandboxRegistry:
    return ctx.runtime.component("sandbox", SandboxRegistry)


@op("sandbox.register", "Register a sandboxed agent session and open its socket")
async def register(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    agent = param(params, "agent", str, "agent")
    if agent not in PRODUCTS or agent == "human":
        agent = "agent"
    argv = param(params, "argv", list, [])
    s = await _registry(ctx).register(
        ctx.principal,
        agent=agent,
        project=param(params, "project", str, ""),
        cwd=os.path.realpath(param(params, "cwd", str, os.getcwd())),
        argv=[str(a) for a in argv][:64],
        tier=param(params, "tier", str, ""),
    )
    reg = _registry(ctx)
    await ctx.runtime.emit(
        Event(
            EventType.SESSION_REGISTERED,
            s.principal(ctx.principal.host).key,
            s.id,
            "sandboxed",
            data={"agent": s.agent, "project": s.project, "cwd": s.cwd, "tier": s.tier},
        )
    )
    paths = reg.paths(s)
    return {
        "session": s.id,
        "agent": s.agent,
        "project": s.project,
        "tier": s.tier,
        "socket": s.socket,
        "session_dir": paths.session_dir,
        "inside_runtime": inside_runtime(),
        "state_dir": paths.state_dir,
        "home": paths.home,
        "writable": list(paths.scratch),
        "hide": ctx.runtime.settings.sandbox_hide,
        "env_allow": ctx.runtime.settings.sandbox_env_allow,
        "bwrap": ctx.runtime.settings.sandbox_bwrap,
    }


@op("sandbox.attach", "Tell the daemon the PID-namespace init of a session's sandbox")
async def attach(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    s = await _registry(ctx).attach(
        ctx.principal, param(params, "session", str, required=True), param(params, "pid", int, 0)
    )
    return {"session": s.id, "state": s.state, "pidns": s.pidns}


@op("sandbox.end", "End a sandboxed session (the launcher calls it when the agent exits)")
async def end(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    s = await _registry(ctx).end(ctx.principal, param(params, "session", str, required=True))
    await ctx.runtime.emit(
        Event(EventType.SESSION_ENDED, s.principal(ctx.principal.host).key, s.id, "ended")
    )
    return {"session": s.id, "state": s.state}


@op("sandbox.list", "Sandboxed sessions of this user", action="query_jobs")
async def list_sessions(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    rows = [
        {k: v for k, v in s.to_dict().items() if k != "argv"}
        for s in _registry(ctx).list()
        if s.uid == ctx.principal.uid
    ]
    return {"sessions": rows}
