"""Small HTML helpers of the dashboard and the page frame (navigation, time window)."""

from __future__ import annotations

import socket
import string
import time
from html import escape
from importlib import resources
from typing import Any

from starlette.requests import Request

from tenantry.core.settings import mask_password
from tenantry.service.runtime import Runtime

WIDE = 1120  # SVG width of a chart that spans the page (text keeps its size)
WINDOWS = ((1, "last hour"), (6, "last 6 hours"), (24, "last 24 hours"), (168, "last 7 days"))
PAGES = (
    ("/", "Overview"),
    ("/sessions", "Sessions"),
    ("/activity", "Commands & jobs"),
    ("/scheduler", "Scheduler"),
    ("/leases", "Leases"),
    ("/policy", "Policy & budgets"),
    ("/memory", "Memory & index"),
    ("/report", "Report"),
)


def template(name: str) -> string.Template:
    text = resources.files("tenantry.gateway").joinpath(f"dashboard/templates/{name}").read_text()
    return string.Template(text)


def e(value: Any) -> str:
    return escape("" if value is None else str(value))


def pill(value: Any) -> str:
    v = e(value)
    return f'<span class="pill {v}">{v}</span>'


def ago(ts: float | None, now: float | None = None) -> str:
    if not ts:
        return ""
    d = max(0.0, (now or time.time()) - ts)
    if d < 90:
        return f"{d:.0f} s ago"
    if d < 5400:
        return f"{d / 60:.0f} min ago"
    if d < 2 * 86400:
        return f"{d / 3600:.1f} h ago"
    return f"{d / 86400:.0f} d ago"


def tile(value: Any, label: str, sub: str = "") -> str:
    extra = f'<div class="s">{e(sub)}</div>' if sub else ""
    return (
        f'<div class="tile"><div class="v">{e(value)}</div>'
        f'<div class="k">{e(label)}</div>{extra}</div>'
    )


def table(header: list[str], rows: list[list[str]], empty: str = "nothing yet") -> str:
    if not rows:
        return f'<p class="empty">{e(empty)}</p>'
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def table_card(
    title: str, header: list[str], rows: list[list[str]], empty: str = "nothing yet"
) -> str:
    """A card holding one table."""
    return card(title, table(header, rows, empty))


def who(principal: str) -> str:
    parts = principal.split("/")
    if len(parts) == 3:
        user, agent, session = parts
        return f"{e(user)} · {e(agent)} <code>{e(session[:8])}</code>"
    return e(principal)


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def card(title: str, inner: str, note: str = "") -> str:
    n = f'<p class="note">{note}</p>' if note else ""
    return f'<section class="card"><h2>{e(title)}</h2>{n}{inner}</section>'


def frame(
    request: Request,
    rt: Runtime,
    title: str,
    body: str,
    hours: int,
    pages: tuple[tuple[str, str], ...] = PAGES,
    everyone: bool = True,
) -> str:
    """A page in the dashboard's frame. The footer names the store (password masked) only to
    a viewer who sees every user: a user's own view does not learn where the service keeps data."""
    path = request.url.path
    nav = "".join(
        f'<a href="{href}?hours={hours}" class="{"on" if href == path else ""}">{e(name)}</a>'
        for href, name in pages
    )
    keep = "".join(
        f'<input type="hidden" name="{e(k)}" value="{e(v)}">'
        for k, v in request.query_params.items()
        if k != "hours"
    )
    options = "".join(
        f'<option value="{h}"{" selected" if h == hours else ""}>{e(label)}</option>'
        for h, label in WINDOWS
    )
    window = (
        f'{keep}<select name="hours" aria-label="time window">{options}</select> '
        "<button>show</button>"
    )
    return template("base.html").substitute(
        title=e(title),
        nav=nav,
        host=e(socket.gethostname()),
        window=window,
        body=body,
        refresh='<meta http-equiv="refresh" content="30">' if path in {"/", "/sessions"} else "",
        generated=e(time.strftime("%Y-%m-%d %H:%M:%S")),
        db=e(mask_password(rt.settings.store_address) if everyone else "the facility service"),
    )


def long_value(text: str, limit: int = 120) -> str:
    """A value cut to one line in its table cell; the whole text in a tooltip and an expander."""
    if len(text) <= limit:
        return f'<span class="cmd"><code>{e(text)}</code></span>'
    return (
        f'<details class="long" title="{e(text)}"><summary><code>{e(text[:limit])}…</code>'
        f"</summary><code>{e(text)}</code></details>"
    )
