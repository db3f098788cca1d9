"""The live characterization: the report built from the facility service's own telemetry.

``tenantry report --live`` sends ``report.live`` through the user's daemon to
the facility service (the Unix socket or the ``munge://`` link), which reads
its journal (every user's sessions, the commands and job events the executors
sent: ``store/live_rows.py``) and returns the same report ``tenantry report``
builds from files, plus a ``facility`` section: per user, per project, per
agent product and by hour of week, each split into agent and human commands
and job submissions.

Who sees what is the service's decision, from the caller's proven uid: staff
(members of ``facility_staff_group``, as humans) and the service's own account
see every user; anyone else gets only their own user's rows, and the answer's
``scope`` says so. The parameters never widen it.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from tenantry.core.errors import UsageError
from tenantry.core.models import Job, JobState, Principal, Resources
from tenantry.service.ops import OpContext, op, param
from tenantry.store import live_rows
from tenantry.store.live_rows import LiveRows

SOURCE = "facility"
MAX_DAYS = 366.0


@dataclass(frozen=True, slots=True)
class Row:
    """One command or one job submission, with what the breakdowns group it by."""

    kind: str  # command | job
    user: str
    agent: str  # the principal's agent product ("human" for the user's own)
    session: str
    project: str
    ts: float

    @property
    def cls(self) -> str:
        return "human" if self.agent == "human" else "agent"


def _state(text: str) -> JobState:
    try:
        return JobState(text.upper())
    except ValueError:
        return JobState.UNKNOWN


def jobs_of(events: Iterable[dict[str, Any]]) -> list[Job]:
    """Each job's last view from its ``job.*`` events (``id`` = ``user:job_id``), by submission."""
    jobs: dict[str, Job] = {}
    for ev in events:
        principal, ts, data = str(ev["principal"]), float(ev["ts"]), ev.get("data") or {}
        key = f"{principal.split('/', 1)[0]}:{ev['subject']}"
        job = jobs.get(key)
        if job is None:
            job = jobs[key] = Job(key, "facility", "", JobState.PENDING, principal, -1)
            job.submitted_at = ts
        if isinstance(data.get("resources"), dict):
            job.resources = Resources.from_dict(data["resources"])
        if ev["type"] == "job.submitted":
            job.name = str(data.get("name") or "")
        elif ev["type"] == "job.state" and ev.get("outcome"):
            job.state = _state(str(ev["outcome"]))
            if job.state is JobState.RUNNING and job.started_at is None:
                job.started_at = ts
            if job.state.terminal:
                job.ended_at = ts
    return sorted(jobs.values(), key=lambda j: j.submitted_at)


def rows_of(rows: LiveRows, jobs: list[Job]) -> list[Row]:
    """Commands and submissions with their principal's agent product and project."""
    from tenantry.report.ingest_telemetry import split_key

    project = {str(s["principal"]): str(s["project"] or "") for s in rows.sessions}
    out: list[Row] = []
    for c in rows.commands:
        user, agent, session = split_key(str(c["principal"]))
        where = project.get(str(c["principal"]), "")
        out.append(Row("command", user, agent, session, where, float(c["started_at"])))
    for j in jobs:
        user, agent, session = split_key(j.principal)
        where = project.get(j.principal, "") or j.resources.account
        out.append(Row("job", user, agent, session, where, j.submitted_at))
    return out


def _counts(group: list[Row]) -> dict[str, int]:
    n = Counter((r.kind, r.cls) for r in group)
    return {
        "agent_commands": n[("command", "agent")],
        "human_commands": n[("command", "human")],
        "agent_jobs": n[("job", "agent")],
        "human_jobs": n[("job", "human")],
    }


def breakdown(rows: list[Row], sessions: list[dict[str, Any]], zone: str) -> dict[str, Any]:
    """Per user, per project, per agent product and hour of week (agent vs human)."""
    by_user: dict[str, list[Row]] = defaultdict(list)
    by_project: dict[str, list[Row]] = defaultdict(list)
    by_agent: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_user[r.user].append(r)
        by_project[r.project].append(r)
        by_agent[r.agent].append(r)
    agent_sessions: dict[str, set[str]] = defaultdict(set)
    for s in sessions:
        agent_sessions[str(s["agent"])].add(str(s["principal"]))
    tz = ZoneInfo(zone)
    week: dict[str, list[list[int]]] = {c: [[0] * 24 for _ in range(7)] for c in ("agent", "human")}
    for r in rows:
        t = datetime.fromtimestamp(r.ts, tz=tz)
        week[r.cls][t.weekday()][t.hour] += 1
    return {
        "by_user": [
            {
                "user": u,
                **_counts(g),
                "agent_products": sorted({r.agent for r in g if r.cls == "agent"}),
                "projects": sorted({r.project for r in g if r.project}),
            }
            for u, g in sorted(by_user.items())
        ],
        "by_project": [
            {"project": p, "users": len({r.user for r in g}), **_counts(g)}
            for p, g in sorted(by_project.items())
        ],
        "by_agent_product": [
            {
                "agent": a,
                "users": len({r.user for r in g}),
                "sessions": len(
                    agent_sessions.get(a, set()) | {f"{r.user}/{r.session}" for r in g}
                ),
                "commands": sum(1 for r in g if r.kind == "command"),
                "jobs": sum(1 for r in g if r.kind == "job"),
            }
            for a, g in sorted(by_agent.items())
        ],
        "hour_of_week": {
            "zone": zone,
            "definition": "commands and job submissions per weekday (Monday first) and hour, "
            "by the class of the principal that made them",
            **week,
        },
    }


def dataset(rows: LiveRows, jobs: list[Job]) -> Any:
    """The report's ``Dataset`` of these rows (polars loads here, off the event loop)."""
    import polars as pl

    from tenantry.report import schema as sc
    from tenantry.report.ingest_telemetry import split_key, tag

    def ts(v: float | None) -> datetime | None:
        return None if v is None else datetime.fromtimestamp(v, tz=UTC)

    commands = []
    for c in rows.commands:
        user, agent, session = split_key(str(c["principal"]))
        commands.append(
            {"source": SOURCE, "user": user, "agent": agent, "session": session,
             "ts": ts(float(c["started_at"]))}
        )  # fmt: skip
    job_rows = []
    for j in jobs:
        user, agent, session = split_key(j.principal)
        ran = j.ended_at - j.started_at if j.ended_at and j.started_at else 0.0
        job_rows.append(
            {"source": SOURCE, "cluster": SOURCE, "job_id": j.id, "submission_id": j.id,
             "user": user, "account": j.resources.account, "name": j.name,
             "state": j.state.value, "submit": ts(j.submitted_at), "start": ts(j.started_at),
             "end": ts(j.ended_at), "elapsed_s": int(ran), "cpus": j.resources.cpus,
             "gpus": j.resources.gpus, "comment": tag(user, agent, session)}
        )  # fmt: skip
    sessions = [
        {"user": s["user"], "agent": s["agent"], "session": s["session"]} for s in rows.sessions
    ]
    stats = sc.IngestStats(source="facility service (live)", kind="live", records=len(job_rows))
    stats.namespace = SOURCE
    stats.notes.append(f"{len(sessions)} sessions, {len(commands)} commands")
    return sc.Dataset(
        jobs=sc.conform(pl.DataFrame(job_rows, schema=sc.JOB_SCHEMA), sc.JOB_SCHEMA),
        commands=sc.conform(pl.DataFrame(commands, schema=sc.COMMAND_SCHEMA), sc.COMMAND_SCHEMA),
        sessions=sc.conform(pl.DataFrame(sessions, schema=sc.SESSION_SCHEMA), sc.SESSION_SCHEMA),
        stats=[stats],
    )


def build(rows: LiveRows, since: float, until: float, zone: str) -> dict[str, Any]:
    """The whole report of these rows (blocking: run it in a thread)."""
    from tenantry.report import metrics

    jobs = jobs_of(rows.job_events)
    report = metrics.build(
        dataset(rows, jobs),
        datetime.fromtimestamp(since, tz=UTC),
        datetime.fromtimestamp(until, tz=UTC),
        tz=zone,
    )
    report["facility"] = breakdown(rows_of(rows, jobs), rows.sessions, zone)
    return report


def scope_of(ctx: OpContext) -> tuple[str | None, dict[str, Any]]:
    """Whose rows the caller may read (None: every user's), decided at the service."""
    rt = ctx.runtime
    p: Principal = ctx.principal
    if rt.identify is None:
        raise UsageError(
            "report.live is answered by the facility service; this daemon is not one and"
            " forwards nothing to one",
            hint="start your daemon in facility mode (tenantry serve --facility ADDR, or the"
            " setting facility_address), or run `tenantry report FILE` on exported data",
        )
    staff = rt.identify.sees_everyone(p)
    group = str(rt.settings.facility_staff_group)
    if staff:
        return None, {"viewer": p.user, "staff": True, "users": "all"}
    note = (
        f"only your own rows ({p.user}): staff (members of the group {group!r}, as"
        " themselves, not through an agent) see every user's"
    )
    return p.user, {"viewer": p.user, "staff": False, "users": [p.user], "note": note}


def zone_of(text: str) -> str:
    try:
        ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise UsageError(f"unknown time zone {text!r}", hint="e.g. UTC or Europe/Berlin") from exc
    return text


@op(
    "report.live",
    "characterize agent vs human use from the facility's telemetry (staff: every user)",
    action="read_report",
)
async def live(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    days = param(params, "days", float, 7.0)
    if not 0 < days <= MAX_DAYS:
        raise UsageError(f"days must be in (0, {MAX_DAYS:g}]")
    zone = zone_of(param(params, "tz", str, "UTC") or "UTC")
    user, scope = scope_of(ctx)
    await ctx.runtime.journal.flush()  # the journal batches events: read every one ingested
    until = time.time() + 1.0
    since = until - days * 86400
    rows = await live_rows.read(ctx.runtime.journal.db, since, until, user)
    report = await asyncio.to_thread(build, rows, since, until, zone)
    report["scope"] = scope
    return report
