"""What the dashboard reads besides the telemetry store (``store/telemetry.py``):
the time window of a request, the latest report file, pending approvals, budget use
and the latest characterization, through the daemon's own ops and components."""

from __future__ import annotations

import dataclasses
import json
import socket
from pathlib import Path
from typing import Any

from starlette.requests import Request

from tenantry.core.models import AgentProduct, Principal
from tenantry.gateway.dashboard.auth import owner
from tenantry.gateway.dashboard.render import WINDOWS
from tenantry.service.runtime import Runtime
from tenantry.store import telemetry as data


def window_of(request: Request) -> tuple[data.Window, int]:
    try:
        hours = int(request.query_params.get("hours", "24"))
    except ValueError:
        hours = 24
    hours = hours if hours in {h for h, _ in WINDOWS} else 24
    return data.Window.last(hours), hours


def argv_of(raw: str) -> list[str]:
    try:
        v = json.loads(raw)
    except ValueError:
        return [raw]
    return [str(x) for x in v] if isinstance(v, list) else [str(v)]


def latest_report(state_dir: str) -> Path | None:
    root = Path(state_dir) / "reports"
    if not root.is_dir():
        return None
    found = [p for p in root.rglob("*") if p.suffix in {".html", ".md", ".json"} and p.is_file()]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def has_op(name: str) -> bool:
    from tenantry.service.ops import REGISTRY

    return name in REGISTRY


async def pending_approvals(rt: Runtime) -> list[dict[str, Any]] | None:
    """Held actions waiting for the human (None: the policy service is not running)."""
    from tenantry.service.ops import REGISTRY, OpContext

    op = REGISTRY.get("approvals.list")
    if op is None or "policy" not in rt.components:
        return None
    listed = await op.fn(OpContext(owner(), rt), {})
    return [a for a in listed["approvals"] if a["status"] == "pending"]


async def budget_usages(
    rt: Runtime, limit: int
) -> tuple[dict[tuple[str, str, str], dict[str, Any]], int] | None:
    """Budget use of the ``limit`` most recently seen principals, keyed by (scope key,
    metric, window), and how many sessions were read (None: no budgets service)."""
    budgets = rt.budgets
    if budgets is None:
        return None
    rows = await data.recent_sessions(rt.journal.db, limit)
    usages: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        try:
            agent = AgentProduct(r["agent"])
        except ValueError:
            agent = AgentProduct.OTHER_AGENT
        p = Principal(r["uid"], r["user"], agent, r["session"], r["host"], r["project"])
        for u in await budgets.status(p):
            usages[(str(u.get("scope_key")), str(u.get("metric")), str(u.get("window")))] = u
    return usages, len(rows)


async def characterization(rt: Runtime, w: data.Window) -> dict[str, Any]:
    """The ``report.latest`` op over the window (raises its TenantryError)."""
    from tenantry.service.ops import REGISTRY, OpContext

    days = max(1.0, (w.until - w.since) / 86400)
    rep: dict[str, Any] = await REGISTRY["report.latest"].fn(
        OpContext(_viewer(), rt), {"days": days}
    )
    return rep


def _viewer() -> Principal:
    """The dashboard's own human principal, on this host."""
    return dataclasses.replace(owner(), host=socket.gethostname())
