"""Lease ops: list leases, release one, fetch a result replayed after a restart."""

from __future__ import annotations

from typing import Any

from tenantry.core.errors import NotFound, PermissionDenied
from tenantry.leases.manager import LeaseManager
from tenantry.service.ops import OpContext, op, param


def _manager(ctx: OpContext) -> LeaseManager:
    return ctx.runtime.component("leases", LeaseManager)


@op("leases.list", "List your leases: state, slots in use, idle time, commands served")
async def list_leases(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    include_ended = param(params, "all", bool, False)
    leases = _manager(ctx).leases(ctx.principal.user, include_ended=include_ended)
    return {
        "leases": leases,
        "idle_core_s": round(sum(x["idle_core_s"] for x in leases), 1),
    }


@op("leases.release", "Release a lease (running commands finish first)", action="release_lease")
async def release(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    lease_id = param(params, "id", str, required=True)
    mgr = _manager(ctx)
    mine = {x["id"]: x for x in mgr.leases(ctx.principal.user, include_ended=True)}
    if lease_id not in mine:
        if lease_id in mgr.lease_ids():
            raise PermissionDenied(f"lease {lease_id} belongs to another user")
        raise NotFound(f"no lease {lease_id}", hint="see `tenantry leases`")
    return {"lease": await mgr.release(lease_id, reason=f"released by {ctx.principal.key}")}


@op("leases.result", "The result of a lease command that finished while the daemon was away")
async def result(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    command_id = param(params, "id", str, required=True)
    found = await _manager(ctx).result(command_id)
    if found is None:
        raise NotFound(f"no replayed result for command {command_id}")
    return {"result": found}
