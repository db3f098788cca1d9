"""Ops of the facility service (answered only by ``tenantry facility serve``).

Executors call ``facility.decide``, ``facility.ingest``, ``facility.flag`` and
``facility.lessons``; people (through their own daemon, which forwards them)
call ``facility.whoami``, ``facility.jobs``, ``facility.job`` and
``facility.events``. A user sees their own jobs and events; staff (members of
the ``facility_staff_group``, as humans) see everyone's.
"""

from __future__ import annotations

import time
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.facility import push
from tenantry.facility.service import FacilityService
from tenantry.facility.status import update_to_wire
from tenantry.service.ops import REGISTRY, OpContext, op, param

SERVICE = "facility_service"


def _service(ctx: OpContext) -> FacilityService:
    return ctx.runtime.component(SERVICE, FacilityService)


@op("facility.decide", "Executor: the facility's decision on one of its ops (gates only)")
async def decide(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    """With ``reuse`` the answer says whether the executor may keep the decision
    (``FacilityService.keepable``)."""
    name = param(params, "op", str, required=True)
    inner = param(params, "params", dict, {})
    svc = _service(ctx)
    warnings = await svc.decide(ctx.principal, name, inner)
    out: dict[str, Any] = {"warnings": warnings}
    if param(params, "reuse", bool, False) and not warnings:
        kept = svc.keepable(ctx.principal, name, inner)
        if kept is not None:
            out.update(decision="allow", reuse=kept)
    return out


@op("facility.ingest", "Executor: record a batch of its events at the facility")
async def ingest(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    events = param(params, "events", list, required=True)
    return {"accepted": await _service(ctx).ingest(ctx.principal, events)}


@op("facility.flag", "Executor: this session received instruction-like content")
async def flag(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    _service(ctx)
    if ctx.runtime.flags is not None:
        ctx.runtime.flags.note_flagged(ctx.principal)
    return {"flagged": ctx.principal.key}


@op("facility.lessons", "Executor: facility lessons matching a failure's output")
async def lessons(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    _service(ctx)
    text = param(params, "text", str, required=True)
    limit = param(params, "limit", int, 3)
    if not 1 <= limit <= 20:
        raise UsageError("limit must be between 1 and 20")
    source = ctx.runtime.lessons
    found = await source.lessons_for_failure(ctx.principal, text, limit) if source else []
    return {"lessons": found}


@op("facility.whoami", "Who the facility service says you are, and whether you are staff")
async def whoami(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    viewer = _service(ctx).viewer(ctx.principal)
    return {"principal": ctx.principal.to_dict(), "staff": viewer.is_staff, "mode": "facility"}


@op("facility.replica", "This replica: leader or follower, and the cluster poller's freshness")
async def replica(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    svc = _service(ctx)
    status, served = svc.replicated, {"served": dict(svc.served)}
    extra = {**served, "slurm_facts": svc.accounts.health() if svc.accounts else None}
    if status is None:
        events = svc.feed.health() if svc.feed is not None else None
        return {"replicated": False, **extra, "slurm_events": events}
    return {"replicated": True, **status.health(), **extra}


@op("facility.jobs", "Jobs at the facility you may see (staff: every user's)", action="query_jobs")
async def jobs(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    svc = _service(ctx)
    active = param(params, "active", bool, False)
    return {"jobs": await svc.jobs.jobs_of(svc.viewer(ctx.principal), active=active)}


@op(
    "facility.job",
    "One job's status at the facility (yours, or any for staff)",
    action="query_jobs",
)
async def job(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    svc = _service(ctx)
    job_id = param(params, "id", str, required=True)
    owner = param(params, "user", str, "")
    viewer = svc.viewer(ctx.principal)
    wait = param(params, "wait_from", str, "")
    if wait:
        timeout = min(max(param(params, "timeout_s", float, 60.0), 0.0), 600.0)
        return await svc.jobs.wait_change(job_id, viewer, wait, timeout, owner)
    return await svc.jobs.status_of(job_id, viewer, owner)


@op(
    "facility.events",
    "Events at the facility you may see (staff: every user's)",
    action="query_jobs",
)
async def events(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    svc = _service(ctx)
    viewer = svc.viewer(ctx.principal)
    since = param(params, "since", float, 0.0)
    if since < 0:
        since = time.time() + since
    types = [str(t) for t in param(params, "types", list, [])]
    limit = param(params, "limit", int, 1000)
    if not 1 <= limit <= 100_000:
        raise UsageError("limit must be between 1 and 100000")
    user = param(params, "user", str, "")
    if not viewer.is_staff:
        user = viewer.user  # everyone else sees their own user's, whatever they ask
    p = ctx.principal
    prefix = p.key if p.is_agent else (f"{user}/" if user else "")
    rows = await ctx.runtime.journal.events(
        since=since, types=types, principal=prefix or None, exact=p.is_agent, limit=limit
    )
    return {"events": rows}


@op("facility.scheduler_status", "Executor: scheduler states of its jobs from the cluster poller")
async def scheduler_status(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    svc = _service(ctx)
    svc.served["scheduler_status"] += 1
    ids = [str(i) for i in param(params, "ids", list, [])][:10_000]
    if svc.scheduler is None:
        return {"source": "", "jobs": {}}
    found = await svc.scheduler.query(ids, svc.viewer(ctx.principal))
    return {"source": "poller", "jobs": {k: update_to_wire(v) for k, v in found.items()}}


@op("facility.job_changes", "Executor: its jobs' state changes after a sequence (long poll)")
async def job_changes(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    """Pushed to executors: answered as soon as one of the caller's jobs changes."""
    svc = _service(ctx)
    svc.served["job_changes"] += 1
    if svc.status_cache is None:
        return {"push": False, "seq": 0, "changes": []}
    since = param(params, "since", int, 0)
    timeout = min(max(param(params, "timeout_s", float, push.WAIT_S), 0.0), 300.0)
    theirs = param(params, "stream", str, "")
    svc.status_cache.watch(ctx.principal.user)  # its jobs' changes set the poller's pace
    return await push.changes_for(
        svc.status_cache, ctx.principal.user, since, timeout, stream=svc.stream, their_stream=theirs
    )


def _stop_concerns(stop: dict[str, Any], user: str) -> bool:
    target = str(stop.get("target", ""))
    if stop.get("kind") == "user":
        return target == user
    return "/" not in target or target.startswith(f"{user}/")  # a bare session id, or one of yours


@op("facility.stops", "Executor: active stops that concern its user, once they change")
async def stops(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    """Long poll: returns when the kill switch changed since ``version`` (or at the timeout).

    With ``policy`` (the policy version the executor holds) it returns as well when the
    facility policy's version moved; the answer names the current one (``policy``).
    """
    svc = _service(ctx)
    since = param(params, "version", int, -1)
    timeout = min(max(param(params, "timeout_s", float, 30.0), 0.0), 300.0)
    held = params.get("policy")
    version = await svc.wait_stops(since, timeout, held if isinstance(held, str) else None)
    listed = REGISTRY["admin.list_stopped"]
    everything = (await listed.fn(ctx, {}))["stopped"]
    mine = [s for s in everything if isinstance(s, dict) and _stop_concerns(s, ctx.principal.user)]
    return {"version": version, "stopped": mine, "policy": svc.policy_version()}
