"""Read-only queries over the main store's telemetry tables (events, sessions,
commands, jobs): the repository the dashboard and the metrics exporter read through.

Every function takes the daemon's ``Store`` and a time window and returns
plain data; nothing here writes. Capabilities that other components add
(leases, memory, index, policy, budgets) are read from the events they emit,
so a daemon without them shows zeros, not errors.
"""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from tenantry.store.engine import Row, Store

LIVE_S = 15 * 60  # a session seen in the last 15 minutes is live


@dataclass(frozen=True, slots=True)
class Window:
    since: float
    until: float
    buckets: int

    @classmethod
    def last(cls, hours: float, buckets: int = 24, now: float | None = None) -> Window:
        until = now or time.time()
        return cls(until - hours * 3600, until, buckets)

    @property
    def width(self) -> float:
        return (self.until - self.since) / self.buckets

    def index(self, ts: float) -> int:
        return min(self.buckets - 1, max(0, int((ts - self.since) / self.width)))

    def labels(self) -> list[str]:
        span = self.until - self.since
        fmt = "%H:%M" if span <= 2 * 86400 else "%m-%d"
        return [
            time.strftime(fmt, time.localtime(self.since + i * self.width))
            for i in range(self.buckets)
        ]


def _data(raw: str) -> dict[str, Any]:
    try:
        d = json.loads(raw or "{}")
    except ValueError:
        return {}
    return d if isinstance(d, dict) else {}


def _event(row: Row, *columns: str) -> dict[str, Any]:
    """These columns of an events row, and its ``data`` decoded."""
    return {**{c: row[c] for c in columns}, "data": _data(row["data_json"])}


async def events(
    db: Store, w: Window, types: tuple[str, ...], limit: int = 200_000
) -> list[dict[str, Any]]:
    marks = ",".join("?" for _ in types)
    rows = await db.fetchall(
        f"SELECT ts, type, principal, subject, outcome, duration_s, data_json FROM events"
        f" WHERE ts>=? AND ts<=? AND type IN ({marks}) ORDER BY ts LIMIT ?",
        (w.since, w.until, *types, limit),
    )
    return [_event(r, "ts", "type", "principal", "subject", "outcome", "duration_s") for r in rows]


def series(
    w: Window, items: list[tuple[float, str, float]], order: list[str] | None = None
) -> list[tuple[str, list[float]]]:
    """Bucket (ts, key, amount) into one series per key."""
    acc: dict[str, list[float]] = defaultdict(lambda: [0.0] * w.buckets)
    for ts, key, amount in items:
        acc[key][w.index(ts)] += amount
    keys = [k for k in (order or []) if k in acc] + sorted(k for k in acc if k not in (order or []))
    return [(k, acc[k]) for k in keys]


# --- small reads ------------------------------------------------------------------------


async def recent_sessions(db: Store, limit: int) -> list[dict[str, Any]]:
    """The most recently seen sessions, newest first."""
    rows = await db.fetchall("SELECT * FROM sessions ORDER BY last_seen DESC LIMIT ?", (limit,))
    return [dict(r) for r in rows]


async def active_job_counts(db: Store) -> dict[str, int]:
    """How many jobs are in each not-yet-ended state."""
    rows = await db.fetchall(
        "SELECT state, COUNT(*) AS n FROM jobs"
        " WHERE state IN ('PENDING','RUNNING','CONFIGURING','SUSPENDED') GROUP BY state"
    )
    return {str(r["state"]): int(r["n"]) for r in rows}


# --- pages ------------------------------------------------------------------------------


async def sessions(db: Store, now: float | None = None) -> dict[str, Any]:
    now = now or time.time()
    rows = await recent_sessions(db, 200)
    live = [r for r in rows if r["last_seen"] >= now - LIVE_S and r["agent"] != "human"]
    by_agent = Counter(r["agent"] for r in live)
    humans = sum(1 for r in rows if r["agent"] == "human" and r["last_seen"] >= now - LIVE_S)
    return {"rows": rows, "live": live, "by_agent": by_agent.most_common(), "humans_live": humans}


async def activity(db: Store, w: Window) -> dict[str, Any]:
    cmds = await db.fetchall(
        "SELECT id, principal, argv_json, where_run, started_at, ended_at, exit_code, state"
        " FROM commands WHERE started_at>=? AND started_at<=? ORDER BY started_at DESC LIMIT 50000",
        (w.since, w.until),
    )
    jobs = await db.fetchall(
        "SELECT id, backend_id, name, principal, state, submitted_at, started_at, ended_at"
        " FROM jobs WHERE submitted_at>=? AND submitted_at<=?"
        " ORDER BY submitted_at DESC LIMIT 50000",
        (w.since, w.until),
    )
    cmd_series = series(
        w,
        [(r["started_at"], r["state"] or "running", 1.0) for r in cmds],
        ["completed", "failed", "timeout", "running", "error", "lost"],
    )
    job_series = series(
        w,
        [(r["submitted_at"], r["state"], 1.0) for r in jobs],
        ["COMPLETED", "RUNNING", "PENDING", "FAILED", "CANCELLED", "TIMEOUT"],
    )
    return {
        "commands": [dict(r) for r in cmds[:30]],
        "jobs": [dict(r) for r in jobs[:30]],
        "command_series": cmd_series,
        "job_series": job_series,
        "n_commands": len(cmds),
        "n_jobs": len(jobs),
    }


def data_text(db: Store, field: str) -> str:
    """SQL for the text of ``data_json``'s top-level ``field`` (NULL when absent)."""
    assert field.isidentifier()
    if db.engine == "postgresql":
        return f"(data_json::jsonb ->> '{field}')"
    return f"json_extract(data_json, '$.{field}')"


def data_number(db: Store, field: str) -> str:
    """SQL for the number in ``data_json``'s top-level ``field`` (NULL when absent)."""
    if db.engine == "postgresql":
        return f"({data_text(db, field)})::double precision"
    return data_text(db, field)


async def bucketed(
    db: Store, w: Window, etype: str, key_sql: str, amount_sql: str = "1"
) -> list[tuple[float, str, float]]:
    """(bucket start, key, amount) aggregated in the database: high-volume events never
    cross into Python one by one (100k status queries render in milliseconds)."""
    # ts >= since, so truncation is the floor (PostgreSQL's CAST rounds instead)
    bucket = "FLOOR((ts - ?) / ?)" if db.engine == "postgresql" else "CAST((ts - ?) / ? AS INTEGER)"
    rows = await db.fetchall(
        f"SELECT {bucket} AS b, {key_sql} AS k, SUM({amount_sql}) AS n"
        " FROM events WHERE type=? AND ts>=? AND ts<=? GROUP BY b, k",
        (w.since, w.width, etype, w.since, w.until),
    )
    return [(w.since + (r["b"] + 0.5) * w.width, str(r["k"]), float(r["n"] or 0)) for r in rows]


async def scheduler(db: Store, w: Window) -> dict[str, Any]:
    served = await bucketed(
        db,
        w,
        "status.query",
        f"CASE COALESCE({data_text(db, 'served_from')}, 'cache')"
        " WHEN 'cache' THEN 'answered from cache'"
        f" ELSE 'answered by ' || {data_text(db, 'served_from')} END",
    )
    polls = await bucketed(
        db,
        w,
        "backend.poll",
        "'passed to the scheduler'",
        f"COALESCE({data_number(db, 'calls')}, 1)",
    )
    s = series(w, served + polls, ["answered from cache", "passed to the scheduler"])
    totals = {k: sum(v) for k, v in s}
    cached = totals.get("answered from cache", 0.0)
    backend = totals.get("passed to the scheduler", 0.0)
    rows = await db.fetchall(
        "SELECT duration_s FROM events WHERE type='backend.poll' AND ts>=? AND ts<=?"
        " AND duration_s IS NOT NULL ORDER BY duration_s",
        (w.since, w.until),
    )
    poll_s = [float(r["duration_s"]) for r in rows]
    return {
        "series": s,
        "cached": cached,
        "backend": backend,
        "ratio": cached / backend if backend else None,
        "poll_p50": poll_s[len(poll_s) // 2] if poll_s else None,
        "poll_max": poll_s[-1] if poll_s else None,
    }


async def leases(db: Store, w: Window) -> dict[str, Any]:
    evs = await events(db, w, ("lease.requested", "lease.ready", "lease.released", "lease.lost"))
    current: dict[str, dict[str, Any]] = {}
    ended: list[dict[str, Any]] = []
    idle_core_s = 0.0
    for e in evs:
        lid = e["subject"]
        d = e["data"]
        if e["type"] == "lease.requested":
            current[lid] = {
                "id": lid,
                "principal": e["principal"],
                "state": "requested",
                "since": e["ts"],
                **_shape(d),
            }
        elif e["type"] == "lease.ready":
            entry = current.setdefault(lid, {"id": lid, "principal": e["principal"], **_shape(d)})
            entry.update(state="ready", since=e["ts"], host=d.get("host", ""))
            entry.update({k: v for k, v in _shape(d).items() if v is not None})
        else:
            entry = current.pop(lid, {"id": lid, "principal": e["principal"], **_shape(d)})
            cpus = float(entry.get("cpus") or d.get("cpus") or d.get("slots") or 1)
            if d.get("idle_core_s") is not None:  # the lease manager's own accounting
                idle_cs = float(d["idle_core_s"])
            else:
                idle_cs = float(d.get("idle_s") or 0.0) * cpus
            idle_core_s += idle_cs
            entry.update(
                state=e["type"].split(".")[1],
                ended=e["ts"],
                idle_core_s=idle_cs,
                commands=d.get("served", d.get("commands")),
                reason=d.get("reason", ""),
            )
            ended.append(entry)
    items = [(e["ts"], e["type"].split(".")[1], 1.0) for e in evs]
    return {
        "active": list(current.values()),
        "ended": ended[-30:][::-1],
        "idle_core_hours": idle_core_s / 3600,
        "series": series(w, items, ["requested", "ready", "released", "lost"]),
    }


def _shape(d: dict[str, Any]) -> dict[str, Any]:
    inner = d.get("resources")
    res: dict[str, Any] = inner if isinstance(inner, dict) else d
    return {
        "cpus": res.get("cpus", d.get("slots")),
        "gpus": res.get("gpus"),
        "mem_mb": res.get("mem_mb"),
    }


async def policy(db: Store, w: Window) -> dict[str, Any]:
    kinds = (
        "policy.decision",
        "hook.decision",
        "request.denied",
        "budget.warning",
        "budget.exceeded",
    )
    evs = await events(db, w, kinds)
    denials = [
        e
        for e in evs
        if e["type"] in ("request.denied", "budget.exceeded")
        or (e["type"] != "budget.warning" and e["outcome"] in ("deny", "denied", "ask"))
    ]
    rules = Counter(
        str(e["data"].get("rule") or e["data"].get("metric") or e["subject"] or e["type"])
        for e in denials
    )
    items = [(e["ts"], _denier(e["type"]), 1.0) for e in denials]
    warnings = [e for e in evs if e["type"] == "budget.warning"]
    return {
        "denials": denials[-50:][::-1],
        "by_rule": rules.most_common(10),
        "series": series(w, items, ["policy", "hook", "budget", "kill switch"]),
        "warnings": warnings[-20:][::-1],
    }


async def burn(db: Store, w: Window) -> dict[str, Any]:
    """Core-hours used by finished jobs and commands, per principal."""
    rows = await db.fetchall(
        "SELECT principal, resources_json, started_at, ended_at FROM jobs"
        " WHERE ended_at>=? AND started_at IS NOT NULL",
        (w.since,),
    )
    per: Counter[str] = Counter()
    items: list[tuple[float, str, float]] = []
    for r in rows:
        res = _data(r["resources_json"])
        cpus = float(res.get("cpus") or 1)
        hours = max(0.0, (r["ended_at"] - r["started_at"])) * cpus / 3600
        per[r["principal"]] += hours
        items.append((r["ended_at"], "batch jobs", hours))
    crow = await db.fetchall(
        "SELECT principal, cpu_s, ended_at FROM commands WHERE ended_at>=? AND cpu_s>0", (w.since,)
    )
    for r in crow:
        per[r["principal"]] += r["cpu_s"] / 3600
        items.append((r["ended_at"], "commands", r["cpu_s"] / 3600))
    return {
        "per_principal": per.most_common(12),
        "series": series(w, items, ["batch jobs", "commands"]),
    }


def _denier(etype: str) -> str:
    return {
        "hook.decision": "hook",
        "budget.exceeded": "budget",
        "request.denied": "gateway / kill switch",
    }.get(etype, "policy")


def _memory_hit(e: dict[str, Any]) -> bool:
    """A recall that returned at least one lesson (the outcome is the count)."""
    d, outcome = e["data"], str(e["outcome"])
    if outcome.isdigit():
        return int(outcome) > 0
    if isinstance(d.get("returned"), list):
        return bool(d["returned"])
    return outcome == "hit"


def _index_hit(e: dict[str, Any]) -> bool:
    """A query answered from the index (not by walking the file system)."""
    d, outcome = e["data"], str(e["outcome"])
    if d.get("served_from"):
        return bool(d["served_from"] == "index")
    return outcome in ("ok", "hit", "index")


async def hit_rates(db: Store, w: Window) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, etype, hit in (
        ("memory", "memory.recall", _memory_hit),
        ("index", "index.query", _index_hit),
    ):
        evs = await events(db, w, (etype,))
        hits = sum(1 for e in evs if hit(e))
        out[name] = {
            "total": len(evs),
            "hits": hits,
            "rate": hits / len(evs) if evs else None,
            "series": series(
                w, [(e["ts"], "hit" if hit(e) else "miss", 1.0) for e in evs], ["hit", "miss"]
            ),
            "latest": evs[-15:][::-1],
        }
    return out


async def overview(db: Store, w: Window) -> dict[str, Any]:
    s = await sessions(db)
    a = await activity(db, w)
    sch = await scheduler(db, w)
    pol = await policy(db, w)
    hr = await hit_rates(db, w)
    le = await leases(db, w)
    return {"sessions": s, "activity": a, "scheduler": sch, "policy": pol, "hits": hr, "leases": le}


async def session_timeline(db: Store, key: str, w: Window) -> dict[str, Any]:
    """Everything one principal (``user/agent/session``) did in the window."""
    row = await db.fetchone("SELECT * FROM sessions WHERE principal=?", (key,))
    rows = await db.fetchall(
        "SELECT ts, type, subject, outcome, duration_s, data_json FROM events"
        " WHERE principal=? AND ts>=? AND ts<=? ORDER BY ts DESC LIMIT 500",
        (key, w.since, w.until),
    )
    evs = [_event(r, "ts", "type", "subject", "outcome", "duration_s") for r in rows]
    kinds = Counter(e["type"] for e in evs)
    return {"session": dict(row) if row else None, "events": evs, "kinds": kinds}
