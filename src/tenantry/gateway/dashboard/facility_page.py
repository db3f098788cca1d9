"""The dashboard's facility page: the live report's breakdown, for whoever is logged in.

``/facility`` shows, per user, per project and per agent product, the agent
and human commands and job submissions of the window (``report.live``, as
the logged-in viewer). The token decides who that is (``auth.Auth.who``):
the service's token and staff see every user; a user who logged in with
their own token sees their own rows, and only this page (``OWN_PAGES``).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from tenantry.core.errors import TenantryError
from tenantry.gateway.dashboard.auth import Viewer
from tenantry.gateway.dashboard.render import PAGES, card, e, table, tile
from tenantry.report.live import live
from tenantry.service.ops import OpContext
from tenantry.service.runtime import Runtime
from tenantry.store import telemetry as data

FACILITY = ("/facility", "Facility")
OWN_PAGES = (FACILITY[0],)  # the pages a viewer who sees only their own rows may open
COUNTS = ("agent_commands", "human_commands", "agent_jobs", "human_jobs")
DAYS = ("agent commands", "human commands", "agent jobs", "human jobs")
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def nav_of(viewer: Viewer, rt: Runtime) -> tuple[tuple[str, str], ...]:
    """The menu: every page for who sees everyone (plus this one in facility mode), else this."""
    if not viewer.everyone:
        return (FACILITY,)
    return (*PAGES, FACILITY) if rt.identify is not None else PAGES


def own_only(viewer: Viewer) -> str:
    """The refusal of a whole-facility page to a viewer of their own rows."""
    return (
        "<!doctype html><title>Tenantry: your own view</title>"
        f"<p>Logged in as <b>{e(viewer.principal.user)}</b>: you see your own data only, on "
        '<a href="/facility">/facility</a>. The other pages show every user (staff only).</p>'
    )


def _rows(rows: list[dict[str, Any]], name: str) -> list[list[str]]:
    return [[e(r[name] or "-"), *(e(r[c]) for c in COUNTS)] for r in rows]


def _week(hours: dict[str, Any]) -> str:
    rows = []
    for day, name in enumerate(WEEKDAYS):
        agent, human = hours["agent"][day], hours["human"][day]
        busy = [f"{h:02d}h: {agent[h]}/{human[h]}" for h in range(24) if agent[h] or human[h]]
        rows.append([name, e(sum(agent)), e(sum(human)), e(", ".join(busy) or "-")])
    return table(["day", "agent", "human", "hours (agent/human)"], rows)


def render(rep: dict[str, Any]) -> str:
    fac, scope = rep["facility"], rep["scope"]
    who = "every user" if scope["staff"] else f"your own rows ({scope['viewer']})"
    totals = [sum(r[c] for r in fac["by_user"]) for c in COUNTS]
    tiles = "".join(tile(n, label) for n, label in zip(totals, DAYS, strict=True))
    return (
        f'<p class="note" id="scope">Showing {e(who)}.'
        + (f" {e(scope['note'])}" if scope.get("note") else "")
        + f'</p><div class="tiles">{tiles}</div>'
        + card("Per user", table(["user", *DAYS], _rows(fac["by_user"], "user")))
        + card("Per project", table(["project", *DAYS], _rows(fac["by_project"], "project")))
        + card(
            "Per agent product",
            table(
                ["agent", "users", "sessions", "commands", "jobs"],
                [
                    [e(r[k]) for k in ("agent", "users", "sessions", "commands", "jobs")]
                    for r in fac["by_agent_product"]
                ],
            ),
        )
        + card(f"Hour of week ({e(fac['hour_of_week']['zone'])})", _week(fac["hour_of_week"]))
    )


async def page_facility(request: Request, rt: Runtime, w: data.Window) -> str:
    viewer: Viewer = request.state.viewer
    days = max(1.0, (w.until - w.since) / 86400)
    try:
        rep = await live(OpContext(viewer.principal, rt), {"days": days})
    except TenantryError as err:
        return card("Facility", f'<p class="empty">{e(err.message)}</p>')
    return render(rep)
