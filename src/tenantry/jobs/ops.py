"""Job ops: submit, status, list, wait, cancel, logs (answered from the cache)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from tenantry.commands.service import CommandService
from tenantry.core.errors import TenantryError, UsageError
from tenantry.core.models import JobSpec, JobState
from tenantry.jobs.request import JobRequest
from tenantry.jobs.service import JobService
from tenantry.safety.guard.adapters import guard_text_result
from tenantry.service.ops import OpContext, Schema, op, param

SUBMIT_FIELDS: Schema = {
    "script": str,
    "script_text": str,
    "args": list,
    "cwd": str,
    "name": str,
    "resources": dict,
    "output": str,
    "error": str,
    "env": dict,
    "array": str,
    "extra": list,
    "force": bool,
}


def _svc(ctx: OpContext) -> JobService:
    return ctx.runtime.component("jobs", JobService)


@op(
    "jobs.submit",
    "Submit a batch job (journaled, deduplicated)",
    action="submit_job",
    fields=SUBMIT_FIELDS,
)
async def submit(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    param(params, "script", str, required=True)
    if not isinstance(params.get("script_text"), str):
        raise UsageError(
            "missing parameter 'script_text' (the script's content)",
            hint="the CLI reads the file for you; over MCP pass the script text",
        )
    spec = JobSpec.from_dict(JobRequest.from_params(params).checked().spec_params())
    job, existing, note = await _svc(ctx).submit(ctx.principal, spec, ctx.request_id)
    # "existing": this answer is a job that already existed (a retried request
    # or a duplicate), not a new submission; "deduplicated" is its older name
    return {
        "job": _svc(ctx).view(job),
        "existing": existing,
        "deduplicated": existing,
        "note": note,
    }


@op("jobs.status", "Status of jobs from the shared cache", action="query_jobs")
async def status(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    ids = param(params, "ids", list, [])
    if not ids:
        raise UsageError("give at least one job id", hint="list your jobs with `tenantry jobs`")
    jobs = await _svc(ctx).status(ctx.principal, [str(i) for i in ids])
    for job in jobs:  # a failed job shows its lessons wherever it is shown
        if job.get("terminal") and job.get("state") != "COMPLETED":
            job["lessons"] = await _lessons_for_job(ctx, str(job["id"]))
    return {"jobs": jobs}


@op("jobs.list", "List your jobs from the shared cache", action="query_jobs")
async def list_jobs(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    states = [str(s).upper() for s in param(params, "states", list, [])]
    bad = [s for s in states if s not in JobState.__members__]
    if bad:
        raise UsageError(f"unknown job state(s): {', '.join(bad)}")
    jobs = await _svc(ctx).list(
        ctx.principal,
        all_sessions=param(params, "all", bool, True),
        states=states,
        limit=param(params, "limit", int, 200),
    )
    return {"jobs": jobs}


@op("jobs.wait", "Wait until a job ends, with progress", streaming=True, action="query_jobs")
async def wait(ctx: OpContext, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    ref = str(param(params, "id", object, required=True))
    timeout = param(params, "timeout_s", float, None)
    if timeout is not None and timeout < 0:
        raise UsageError("timeout_s must be >= 0")
    heartbeat = param(params, "heartbeat_s", float, 5.0)
    async for chunk in _svc(ctx).wait(ctx.principal, ref, timeout, heartbeat):
        if chunk["done"]:
            result: dict[str, Any] = {"job": chunk["job"], "timed_out": chunk["timed_out"]}
            if chunk["job"]["terminal"] and chunk["job"]["state"] != "COMPLETED":
                result["lessons"] = await _lessons_for_job(ctx, chunk["job"]["id"])
            yield {"result": result}
        else:
            yield {"progress": chunk}


async def _lessons_for_job(ctx: OpContext, job_id: str) -> list[dict[str, Any]]:
    """Facility-memory lessons matching the end of a failed job's error output."""
    commands = ctx.runtime.components.get("commands")
    if not isinstance(commands, CommandService):
        return []
    job = await _svc(ctx).get(ctx.principal, job_id)
    # without a separate error file, stderr is the output file: read it once
    streams = ("stderr", "stdout") if job.error else ("stdout",)
    text = ""
    for stream in streams:
        try:
            text += (await _svc(ctx).logs(ctx.principal, job_id, 60, stream))["text"] + "\n"
        except TenantryError:
            continue
    return await commands.lessons_for(ctx.principal, text)


@op("jobs.cancel", "Cancel a job", action="cancel_job")
async def cancel(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    ref = str(param(params, "id", object, required=True))
    job = await _svc(ctx).cancel(ctx.principal, ref)
    return {"job": _svc(ctx).view(job)}


@op("jobs.logs", "Read the tail of a job's output (untrusted data)", action="read_job_output")
async def logs(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    ref = str(param(params, "id", object, required=True))
    tail = param(params, "tail", int, 200)
    stream = param(params, "stream", str, "stdout")
    task = str(param(params, "task", object, ""))  # one task of an array; default: all
    out = await _svc(ctx).logs(ctx.principal, ref, tail, stream, task)
    if ctx.principal.is_agent:
        out = guard_text_result(out, f"job:{out['job']}")
        _note_flagged(ctx, out)
    return out


def _note_flagged(ctx: OpContext, out: dict[str, Any]) -> None:
    """Tell the policy a session got instruction-like content (it holds what follows)."""
    flags = ctx.runtime.flags
    if flags is not None and out.get("guard", {}).get("instruction_like"):
        flags.note_flagged(ctx.principal)
