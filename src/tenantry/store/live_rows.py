"""Read-only rows of the live characterization: sessions, commands and job events.

The facility service's journal holds every user's telemetry (its ``sessions``
table, the ``commands`` the executors' events fill, the ``job.*`` events);
``report.live`` and the facility dashboard read it through here, for every user
(``user=None``) or for one. A user's rows are those whose principal key starts
with ``user/``; nothing here writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tenantry.store.engine import Store

JOB_TYPES = ("job.submitted", "job.state", "job.cancelled")
LIMIT = 500_000  # rows of each kind read for one report


@dataclass(slots=True)
class LiveRows:
    """What one report reads: plain dicts, oldest first."""

    sessions: list[dict[str, Any]] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    job_events: list[dict[str, Any]] = field(default_factory=list)


def _mine(user: str | None, column: str = "principal") -> tuple[str, tuple[Any, ...]]:
    if user is None:
        return "", ()
    prefix = f"{user}/"
    return f" AND substr({column}, 1, ?)=?", (len(prefix), prefix)


async def read(db: Store, since: float, until: float, user: str | None) -> LiveRows:
    """Every user's rows in ``[since, until)`` (sessions: all seen), or ``user``'s only."""
    where, args = _mine(user)
    sessions = await db.fetchall(
        'SELECT principal, uid, "user", agent,'
        " session, host, project, first_seen, last_seen,"
        f" requests FROM sessions WHERE 1=1{where} ORDER BY first_seen LIMIT ?",
        (*args, LIMIT),
    )
    commands = await db.fetchall(
        "SELECT id, principal, started_at, ended_at, exit_code, state FROM commands"
        f" WHERE started_at>=? AND started_at<?{where} ORDER BY started_at LIMIT ?",
        (since, until, *args, LIMIT),
    )
    marks = ",".join("?" for _ in JOB_TYPES)
    events = await db.fetchall(
        "SELECT ts, type, principal, subject, outcome, data_json FROM events"
        f" WHERE ts>=? AND ts<? AND type IN ({marks}){where} ORDER BY ts, id LIMIT ?",
        (since, until, *JOB_TYPES, *args, LIMIT),
    )
    out = LiveRows(
        sessions=[dict(r) for r in sessions],
        commands=[dict(r) for r in commands],
    )
    for r in events:
        d = dict(r)
        try:
            data = json.loads(d.pop("data_json") or "{}")
        except ValueError:
            data = {}
        d["data"] = data if isinstance(data, dict) else {}
        out.job_events.append(d)
    return out
