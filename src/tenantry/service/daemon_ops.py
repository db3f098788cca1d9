"""Ops about the daemon itself: sessions, events, facility facts, health."""

from __future__ import annotations

import time
from typing import Any

from tenantry import __version__
from tenantry.core import tasks
from tenantry.core.errors import UsageError
from tenantry.service.ops import REGISTRY, OpContext, op, param


@op("sessions.list", "Principals seen by this daemon and their activity", action="query_jobs")
async def sessions(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    rows = await ctx.runtime.journal.sessions(uid=ctx.principal.uid)
    registry = ctx.runtime.sandboxes
    sandboxed = {s.id: s for s in registry.list()} if registry is not None else {}
    for row in rows:
        box = sandboxed.get(str(row.get("session", "")))
        if box is not None and row.get("agent") == box.agent:
            row["kind"], row["sandbox_state"] = "sandboxed", box.state
        else:
            row["kind"] = "human" if row.get("agent") == "human" else "claimed"
    return {"sessions": rows}


@op("events.list", "Telemetry events, oldest first", action="query_jobs")
async def events(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    since = param(params, "since", float, 0.0)
    if since < 0:  # relative: seconds ago
        since = time.time() + since
    types = [str(t) for t in param(params, "types", list, [])]
    limit = param(params, "limit", int, 1000)
    if not 1 <= limit <= 100_000:
        raise UsageError("limit must be between 1 and 100000")
    # an agent session sees its own session's events; a human, all of the user's
    p = ctx.principal
    rows = await ctx.runtime.journal.events(
        since=since,
        types=types,
        principal=p.key if p.is_agent else p.user + "/",
        exact=p.is_agent,
        limit=limit,
    )
    return {"events": rows}


@op("facility.info", "Facility facts: backend, partitions, limits, services")
async def facility_info(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    info = await ctx.runtime.backend.info()
    return {
        "version": __version__,
        "backend": ctx.runtime.backend.name,
        "scheduler": info,
        "services": sorted(ctx.runtime.components),
        # background tasks per component: a failed one makes its component unhealthy
        "health": tasks.health(),
        "unhealthy": [h["component"] for h in tasks.health() if not h["healthy"]],
        "ops": sorted(REGISTRY),
        "you": ctx.principal.to_dict(),
    }
