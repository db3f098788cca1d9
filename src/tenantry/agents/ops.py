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


@op("telemetry.session", "Record an agent session starting or ending (from its hook).")
async def session_event(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    event = param(params, "event", str, required=True)
    if event not in _SESSION_EVENTS:
        from tenantry.core.errors import UsageError

        raise UsageError(f"event must be one of {sorted(_SESSION_EVENTS)}, got {event!r}")
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
    decision = param(params, "decision", str, required=True)
    if decision not in _DECISIONS:
        from tenantry.core.errors import UsageError

        raise UsageError(f"decision must be one of {sorted(_DECISIONS)}, got {decision!r}")
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
