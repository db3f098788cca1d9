"""The dashboard's pages: each renders one view of the daemon's store as HTML."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.requests import Request

from tenantry.gateway.dashboard import queries
from tenantry.gateway.dashboard.auth import ensure_token, form_key
from tenantry.gateway.dashboard.queries import argv_of, latest_report
from tenantry.gateway.dashboard.render import (
    WIDE,
    ago,
    card,
    e,
    long_value,
    pct,
    pill,
    table,
    table_card,
    tile,
    who,
)
from tenantry.gateway.svg import bars, hbars
from tenantry.report.tables import METRICS as REPORT_METRICS
from tenantry.service.runtime import Runtime
from tenantry.store import telemetry as data

SCOPE_CHOICES = ("once", "session", "project", "always")


async def approvals_card(rt: Runtime) -> str:
    """Held actions waiting for the human, each with approve/refuse and a scope."""
    pending = await queries.pending_approvals(rt)
    if pending is None:
        return '<p class="empty">The policy service is not running in this daemon.</p>'
    key = form_key(ensure_token(rt.settings.state_dir))
    now = time.time()
    scopes = "".join(f'<option value="{s}">{s}</option>' for s in SCOPE_CHOICES)
    rows = [
        [
            e(ago(a["created"], now)),
            who(a["principal"]),
            e(a["action"]),
            e(a["rule"]),
            e(a["label"]),
            '<form method="post" action="/approvals">'
            f'<input type="hidden" name="id" value="{e(a["id"])}">'
            f'<input type="hidden" name="key" value="{key}">'
            f'<select name="scope" aria-label="scope">{scopes}</select> '
            '<button name="decision" value="approve">approve</button> '
            '<button name="decision" value="refuse">refuse</button></form>',
        ]
        for a in pending
    ]
    return table(
        ["when", "who", "action", "rule", "what", "decide"], rows, "nothing waiting for you"
    )


async def page_overview(request: Request, rt: Runtime, w: data.Window) -> str:
    o = await data.overview(rt.journal.db, w)
    s, a, sch, pol, hits, le = (
        o["sessions"],
        o["activity"],
        o["scheduler"],
        o["policy"],
        o["hits"],
        o["leases"],
    )
    live = len(s["live"])
    by_agent = ", ".join(f"{k} {v}" for k, v in s["by_agent"]) or "none"
    cache_total = sch["cached"] + sch["backend"]
    tiles = "".join(
        [
            tile(live, "live agent sessions", by_agent),
            tile(a["n_commands"], "commands", "in the window"),
            tile(a["n_jobs"], "batch jobs", "submitted in the window"),
            tile(
                pct(sch["cached"] / cache_total if cache_total else None),
                "status answered from cache",
                f"{sch['cached']:.0f} cached, {sch['backend']:.0f} scheduler calls",
            ),
            tile(len(pol["denials"]), "policy denials", "deny or ask, policy and hooks"),
            tile(len(le["active"]), "leases held", f"{le['idle_core_hours']:.1f} idle core-hours"),
            tile(
                pct(hits["memory"]["rate"]), "memory hit rate", f"{hits['memory']['total']} recalls"
            ),
            tile(pct(hits["index"]["rate"]), "index hit rate", f"{hits['index']['total']} queries"),
        ]
    )
    labels = w.labels()
    charts = (
        '<div class="grid2">'
        + card("Commands", bars(labels, a["command_series"], title="Commands over time by outcome"))
        + card(
            "Batch jobs", bars(labels, a["job_series"], title="Jobs submitted over time by state")
        )
        + "</div>"
    )
    return f'<div class="tiles">{tiles}</div>{charts}'


async def page_sessions(request: Request, rt: Runtime, w: data.Window) -> str:
    s = await data.sessions(rt.journal.db)
    now = time.time()
    chart = hbars([(k, float(v)) for k, v in s["by_agent"]], title="Live sessions by agent product")
    rows = [
        [
            pill(r["agent"]),
            e(r["user"]),
            f'<a href="/session?key={quote(r["principal"], safe="")}">'
            f"<code>{e(r['session'][:12] or '-')}</code></a>",
            e(r["host"]),
            e(r["project"]),
            e(r["requests"]),
            e(ago(r["first_seen"], now)),
            e(ago(r["last_seen"], now)),
        ]
        for r in s["rows"][:100]
    ]
    note = (
        f"Live: seen in the last {data.LIVE_S // 60} minutes. "
        f"{s['humans_live']} human session(s) are live too."
    )
    return card("Live sessions by agent product", chart, note) + table_card(
        "All sessions, latest first",
        ["agent", "user", "session", "host", "project", "requests", "first seen", "last seen"],
        rows,
    )


def _detail(ev: dict[str, Any]) -> str:
    d = ev["data"]
    if ev["type"].startswith("command."):
        argv = d.get("argv") or []
        text = " ".join(str(a) for a in argv) if isinstance(argv, list) else str(argv)
        tail = f" → exit {d['exit_code']}" if d.get("exit_code") is not None else ""
        return f"<code>{e(text)}</code>{e(tail)}"
    if ev["type"] == "hook.decision":
        return f"{e(d.get('rule'))}: <code>{e(d.get('command'))}</code>"
    if ev["type"] == "session.seen":
        return e(" ".join(str(x) for x in (d.get("event"), d.get("source"), d.get("cwd")) if x))
    if ev["type"].startswith("job."):
        name = d.get("name") or (d.get("script") and Path(str(d["script"])).name) or ""
        extra = f" ({name})" if name else ""
        return e(f"job {ev['subject']}{extra} {d.get('reason') or ''}".strip())
    if ev["type"] == "status.query":
        return e(f"{d.get('jobs', '')} job(s), from the {d.get('served_from', 'cache')}")
    return e(", ".join(f"{k}={v}" for k, v in list(d.items())[:4]))


async def page_session(request: Request, rt: Runtime, w: data.Window) -> str:
    key = request.query_params.get("key", "")
    t = await data.session_timeline(rt.journal.db, key, w)
    now = time.time()
    s = t["session"]
    if s is None:
        return card("Session", f'<p class="empty">No session {e(key)} in the store.</p>')
    k = t["kinds"]
    tiles = "".join(
        [
            tile(s["agent"], "agent product", f"{s['user']} on {s['host'] or '?'}"),
            tile(k.get("command.finished", 0), "commands through Tenantry"),
            tile(k.get("job.submitted", 0), "batch jobs submitted"),
            tile(k.get("status.query", 0), "status queries from the cache"),
            tile(k.get("hook.decision", 0), "commands redirected or denied"),
        ]
    )
    rows = [
        [
            e(ago(ev["ts"], now)),
            pill(ev["type"]),
            pill(ev["outcome"]) if ev["outcome"] else "",
            _detail(ev),
        ]
        for ev in t["events"]
    ]
    return f'<div class="tiles">{tiles}</div>' + table_card(
        f"Timeline of {key}", ["when", "event", "outcome", "detail"], rows, "no event in the window"
    )


async def page_activity(request: Request, rt: Runtime, w: data.Window) -> str:
    a = await data.activity(rt.journal.db, w)
    labels = w.labels()
    now = time.time()
    cmds = [
        [
            e(ago(r["started_at"], now)),
            who(r["principal"]),
            long_value(" ".join(argv_of(r["argv_json"]))),
            e(r["where_run"]),
            pill(r["state"]),
            e(r["exit_code"]),
            e(f"{(r['ended_at'] or now) - r['started_at']:.1f} s"),
        ]
        for r in a["commands"]
    ]
    jobs = [
        [
            e(r["id"]),
            e(r["backend_id"]),
            e(r["name"]),
            who(r["principal"]),
            pill(r["state"]),
            e(ago(r["submitted_at"], now)),
        ]
        for r in a["jobs"]
    ]
    return (
        card(
            "Commands over time",
            bars(labels, a["command_series"], title="Commands by outcome", width=WIDE),
        )
        + card(
            "Batch jobs over time", bars(labels, a["job_series"], title="Jobs by state", width=WIDE)
        )
        + table_card(
            "Latest commands", ["when", "who", "command", "where", "state", "exit", "took"], cmds
        )
        + table_card(
            "Latest jobs", ["job", "backend id", "name", "who", "state", "submitted"], jobs
        )
    )


async def page_scheduler(request: Request, rt: Runtime, w: data.Window) -> str:
    sch = await data.scheduler(rt.journal.db, w)
    total = sch["cached"] + sch["backend"]
    ratio = f"{sch['ratio']:.1f}×" if sch["ratio"] else "–"
    tiles = "".join(
        [
            tile(f"{sch['cached']:.0f}", "status queries answered from the cache"),
            tile(
                f"{sch['backend']:.0f}",
                "calls passed to the scheduler",
                "one poll serves every agent",
            ),
            tile(ratio, "queries per scheduler call"),
            tile(
                "–" if sch["poll_p50"] is None else f"{1000 * sch['poll_p50']:.0f} ms",
                "median scheduler poll",
                "" if sch["poll_max"] is None else f"max {1000 * sch['poll_max']:.0f} ms",
            ),
        ]
    )
    meter = (
        f'<progress class="share" max="100" value="{100 * sch["cached"] / total:.0f}" '
        'aria-label="share answered from the cache"></progress>'
        if total
        else ""
    )
    chart = bars(
        w.labels(), sch["series"], title="Scheduler queries: cache versus scheduler", width=WIDE
    )
    note = (
        "Without Tenantry every agent polls <code>squeue</code> itself; here one poller per "
        "backend refreshes the cache and agents read it."
    )
    return f'<div class="tiles">{tiles}</div>' + card("Cache versus scheduler", chart + meter, note)


async def page_leases(request: Request, rt: Runtime, w: data.Window) -> str:
    le = await data.leases(rt.journal.db, w)
    now = time.time()
    active = [
        [
            e(x["id"]),
            who(x["principal"]),
            pill(x["state"]),
            e(x.get("cpus")),
            e(x.get("gpus")),
            e(x.get("host", "")),
            e(ago(x.get("since"), now)),
        ]
        for x in le["active"]
    ]
    ended = [
        [
            e(x["id"]),
            who(x["principal"]),
            pill(x["state"]),
            e(x.get("cpus")),
            e(x.get("commands")),
            e(f"{(x.get('idle_core_s') or 0) / 3600:.2f}"),
            e(ago(x.get("ended"), now)),
            e(x.get("reason", "")),
        ]
        for x in le["ended"]
    ]
    tiles = tile(len(le["active"]), "leases held now") + tile(
        f"{le['idle_core_hours']:.2f}", "idle core-hours", "held but running nothing, in the window"
    )
    has_leases = rt.leases is not None
    note = (
        ""
        if has_leases
        else "The lease manager is not running in this daemon; only past events are shown."
    )
    return (
        f'<div class="tiles">{tiles}</div>'
        + card(
            "Lease events",
            bars(w.labels(), le["series"], title="Lease events over time", width=WIDE),
            note,
        )
        + table_card(
            "Held leases",
            ["lease", "who", "state", "cpus", "gpus", "host", "since"],
            active,
            "no lease is held",
        )
        + table_card(
            "Released leases and their idle cost",
            ["lease", "who", "end", "cpus", "commands", "idle core-h", "ended", "reason"],
            ended,
        )
    )


def _denial_detail(x: dict[str, Any]) -> str:
    d = x["data"]
    if d.get("command"):
        return f"<code>{e(d['command'])}</code>"
    if x["type"] == "budget.exceeded":
        return e(_budget_text(d) or d.get("message") or "")
    text = d.get("message") or d.get("resource") or ""
    action = x["subject"] if x["type"] == "policy.decision" else ""
    return e(f"{action}: {text}" if action and text else text or action)


def _budget_text(d: dict[str, Any]) -> str:
    if "metric" not in d:
        return str(d.get("message") or "")
    used, limit = d.get("used"), d.get("limit")
    frac = d.get("fraction")
    share = f" ({100 * float(frac):.0f} %)" if isinstance(frac, int | float) else ""
    scope = f" of {d.get('scope')} {d.get('scope_key') or ''}".rstrip() if d.get("scope") else ""
    return f"{d['metric']} {used} / {limit}{share}{scope} per {d.get('window', '?')}"


async def budgets_in_force(rt: Runtime, limit: int = 12, shown: int = 10) -> str:
    """Budget use of the most recently seen principals, from the budgets component."""
    found = await queries.budget_usages(rt, limit)
    if found is None:
        return '<p class="empty">The budgets service is not running in this daemon.</p>'
    usages, n_sessions = found
    ranked = sorted(usages.values(), key=lambda u: -float(u.get("fraction") or 0.0))
    out: list[list[str]] = []
    for u in ranked[:shown]:
        frac = float(u.get("fraction") or 0.0)
        out.append(
            [
                e(f"{u.get('scope')} {u.get('scope_key')}"),
                e(u.get("metric")),
                e(u.get("window")),
                e(f"{u.get('used')} / {u.get('limit')}"),
                f'<progress max="100" value="{min(100.0, 100 * frac):.0f}" '
                f'aria-label="share used"></progress> {e(f"{100 * frac:.0f} %")}',
            ]
        )
    note = (
        f'<p class="note">The {len(out)} budgets closest to their limit, of {len(usages)} that '
        f"apply to the {n_sessions} most recent sessions.</p>"
        if usages
        else ""
    )
    return note + table(
        ["scope", "metric", "window", "used / limit", "share"], out, "no budget applies"
    )


async def page_policy(request: Request, rt: Runtime, w: data.Window) -> str:
    pol = await data.policy(rt.journal.db, w)
    burn = await data.burn(rt.journal.db, w)
    now = time.time()
    rows = [
        [
            e(ago(x["ts"], now)),
            who(x["principal"]),
            pill(x["outcome"] or "deny"),
            e(data._denier(x["type"])),
            e(x["data"].get("rule") or x["data"].get("metric") or x["subject"] or ""),
            _denial_detail(x),
        ]
        for x in pol["denials"]
    ]
    warn = [
        [e(ago(x["ts"], now)), who(x["principal"]), e(_budget_text(x["data"]) or x["outcome"])]
        for x in pol["warnings"]
    ]
    per = hbars(
        [
            (p.split("/")[0] + " · " + p.split("/")[1] if p.count("/") == 2 else p, v)
            for p, v in burn["per_principal"]
        ],
        title="Core-hours by principal",
    )
    return (
        card(
            "Waiting for approval",
            await approvals_card(rt),
            "an agent's held action runs only once you approve it here or with `tenantry approve`",
        )
        + '<div class="grid2">'
        + card("Denials over time", bars(w.labels(), pol["series"], title="Denials over time"))
        + card(
            "Denials by rule",
            hbars([(k, float(v)) for k, v in pol["by_rule"]], title="Denials by rule"),
        )
        + "</div>"
        + table_card(
            "Latest denials",
            ["when", "who", "decision", "by", "rule", "what"],
            rows,
            "no denial in the window",
        )
        + '<div class="grid2">'
        + card(
            "Budget burn",
            bars(w.labels(), burn["series"], title="Core-hours used over time", unit=" core-h"),
        )
        + card("Core-hours by principal", per)
        + "</div>"
        + card("Budgets in force", await budgets_in_force(rt))
        + table_card(
            "Budget warnings", ["when", "who", "warning"], warn, "no budget warning in the window"
        )
    )


async def page_memory(request: Request, rt: Runtime, w: data.Window) -> str:
    hr = await data.hit_rates(rt.journal.db, w)
    out = []
    for name, title in (
        ("memory", "Facility memory recalls"),
        ("index", "Workspace index queries"),
    ):
        h = hr[name]
        tiles = tile(pct(h["rate"]), f"{name} hit rate") + tile(
            h["total"], "queries", f"{h['hits']} hits"
        )
        out.append(f'<div class="tiles">{tiles}</div>')
        out.append(
            card(
                title, bars(w.labels(), h["series"], title=f"{title}: hits and misses", width=WIDE)
            )
        )
    return "".join(out)


def _num(v: Any) -> str:
    if v is None:
        return "–"
    f = float(v)
    return f"{f:,.0f}" if abs(f) >= 100 else f"{f:,.2f}".rstrip("0").rstrip(".")


def _pctv(v: Any) -> str:
    return "–" if v is None else f"{float(v):.1f} %"


def render_report(rep: dict[str, Any]) -> str:
    """The characterization's headline (the paper's table) and command rate."""
    w = rep.get("window") or {}
    head = rep.get("headline") or {}
    rows, shares = [], []
    for key, label in REPORT_METRICS:
        h = head.get(key)
        if not isinstance(h, dict):
            continue
        share = h.get("share_pct") or {}
        lo, hi = [*(h.get("agent_bounds_pct") or []), None, None][:2]
        rows.append(
            [
                e(label),
                e(_pctv(share.get("agent"))),
                e(_pctv(share.get("unknown"))),
                e(_pctv(share.get("human"))),
                e(f"{_pctv(lo)} – {_pctv(hi)}"),
                e(_num(h.get("total"))),
            ]
        )
        if share.get("agent") is not None:
            shares.append((label, float(share["agent"])))
    out = [
        f'<p class="note">Window {e(w.get("since", "?"))} to {e(w.get("until", "?"))}, '
        "from this daemon's store (the <code>report.latest</code> op).</p>",
        table(["metric", "agent", "unknown", "human", "agent bounds", "total"], rows, "no jobs"),
    ]
    if shares:
        out.append(hbars(shares, title="Agent share of the facility, percent"))
    cr = rep.get("command_rate") or {}
    if cr.get("ratio_pooled") is not None:
        out.append(
            f'<p class="note">Agents issue commands at <strong>{e(_num(cr["ratio_pooled"]))}×'
            f"</strong> the human rate (pooled; {e(_num(cr.get('ratio_of_medians')))}× "
            "ratio of medians).</p>"
        )
    return "".join(out)


async def page_report(request: Request, rt: Runtime, w: data.Window) -> str:
    from tenantry.core.errors import TenantryError

    cards: list[str] = []
    if queries.has_op("report.latest"):
        try:
            rep = await queries.characterization(rt, w)
        except TenantryError as err:
            inner = f'<p class="empty">{e(err.message)}</p>'
        else:
            try:
                inner = render_report(rep)
            except (TypeError, ValueError, KeyError, AttributeError):
                inner = f"<pre>{e(json.dumps(rep, indent=2, default=str)[:100_000])}</pre>"
        cards.append(card("Characterization of this daemon's activity", inner))
    path = latest_report(rt.settings.state_dir)
    if path is None:
        cards.append(
            card(
                "Latest facility report",
                '<p class="empty">No report yet. Make one with <code>tenantry report</code>; '
                "reports are read from "
                f"<code>{e(Path(rt.settings.state_dir) / 'reports')}</code>.</p>",
            )
        )
        return "".join(cards)
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
    head = f'<p class="note"><code>{e(path.name)}</code>, written {e(when)}.</p>'
    if path.suffix == ".html":
        inner = '<iframe class="report" sandbox src="/report/raw" title="report"></iframe>'
    else:
        inner = f"<pre>{e(path.read_text(errors='replace')[:200_000])}</pre>"
    cards.append(card("Latest facility report", head + inner))
    return "".join(cards)
