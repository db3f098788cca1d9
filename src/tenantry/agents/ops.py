"""Ops the agent hooks call: session start/stop and hook decisions, as events.

``telemetry.session`` turns an agent's session start or end (reported by
``tenantry hook``) into a ``session.seen`` event; ``telemetry.hook`` records a
hook's deny/ask verdict as ``hook.decision``. Both are fire-and-forget for the
hook, and both attribute the event to the calling principal.
"""

from __future__ import annotations

from typing import Any

from tenantry.core.events import Event, EventType
from tenantry.service.ops import OpContext, op, param

_SESSION_EVENTS = {"start", "end"}
_DECISIONS = {"deny", "ask", "allow"}


def _one_of(params: dict[str, Any], name: str, allowed: set[str]) -> str:
    value = param(params, name, str, required=True)
    if value not in allowed:
        from tenantry.core.errors import UsageError

        raise UsageError(f"{name} must be one of {sorted(allowed)}, got {value!r}")
    return value


@op("telemetry.session", "Record an agent session starting or ending (from its hook).")
async def session_event(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    event = _one_of(params, "event", _SESSION_EVENTS)
    data = {
        "event": event,
        "agent": param(params, "agent", str, ctx.principal.agent.value),
        "cwd": param(params, "cwd", str, ""),
        "source": param(params, "source", str, ""),
        "host": ctx.principal.host,
    }
    session = param(params, "session", str, "") or ctx.principal.session
    await ctx.runtime.emit(
        Event(
            EventType.SESSION_SEEN,
            principal=ctx.principal.key,
            subject=session,
            outcome=event,
            data=data,
        )
    )
    return {"recorded": True, "principal": ctx.principal.key}


@op("telemetry.hook", "Record a hook's verdict on an agent's tool call.")
async def hook_decision(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    decision = _one_of(params, "decision", _DECISIONS)
    data = {
        "agent": param(params, "agent", str, ctx.principal.agent.value),
        "rule": param(params, "rule", str, ""),
        "command": param(params, "command", str, "")[:500],
        "tool": param(params, "tool", str, ""),
    }
    await ctx.runtime.emit(
        Event(
            EventType.HOOK_DECISION,
            principal=ctx.principal.key,
            subject=param(params, "session", str, "") or ctx.principal.session,
            outcome=decision,
            data=data,
        )
    )
    return {"recorded": True}
