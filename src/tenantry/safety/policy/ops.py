"""Policy ops: ``policy.check`` (a dry run) and the approvals of held actions."""

from __future__ import annotations

import dataclasses
from typing import Any

from tenantry.core.errors import PermissionDenied, UsageError
from tenantry.core.models import AgentProduct
from tenantry.safety.policy.component import PolicyService
from tenantry.service.ops import OpContext, op, param


@op("policy.check", "Dry-run one policy decision and name the rule that decides it")
async def check(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    """Params: ``action``, ``params`` (the op params to judge), optional ``agent``/``session``.

    Judging as another agent product or session of the *same* user is allowed:
    a dry run grants nothing. With ``reuse`` the answer says whether the asker
    may keep it, and on what it rests (``reuse``: ``policy.reuse.describe``;
    a facility executor keeps its hooks' answers so).
    """
    action = param(params, "action", str, required=True)
    inner = param(params, "params", dict, {})
    principal = ctx.principal
    agent = param(params, "agent", str, "")
    if agent:
        try:
            product = AgentProduct(agent)
        except ValueError as exc:
            raise UsageError(
                f"unknown agent product {agent!r}",
                hint="one of: " + ", ".join(a.value for a in AgentProduct),
            ) from exc
        principal = dataclasses.replace(
            principal, agent=product, session=param(params, "session", str, principal.session)
        )
    service = ctx.runtime.component("policy", PolicyService)
    decision = service.check(principal, action, inner)
    out = decision.to_dict()
    if param(params, "reuse", bool, False):
        out["reuse"] = service.reuse_of(decision)
    return out


def _approval_view(a: Any) -> dict[str, Any]:
    return dataclasses.asdict(a)


@op("approvals.list", "Held actions waiting for the human, and recent grants")
async def approvals_list(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    from tenantry.safety.policy.approvals import now

    service = ctx.runtime.component("policy", PolicyService)
    items = service.approvals.listing(ctx.principal.user, now())
    return {"approvals": [_approval_view(a) for a in items]}


@op("approvals.decide", "Approve or refuse a held action (humans only)", action="approve")
async def approvals_decide(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    from tenantry.safety.policy.approvals import now

    if ctx.principal.is_agent:  # the policy forbids it too; this holds without any policy
        raise PermissionDenied(
            "a session cannot approve held actions", hint="the human runs `tenantry approve`"
        )
    service = ctx.runtime.component("policy", PolicyService)
    a = service.approvals.decide(
        param(params, "id", str, required=True),
        user=ctx.principal.user,
        approve=not param(params, "refuse", bool, False),
        scope=param(params, "scope", str, "once"),
        for_s=param(params, "for_s", float, 8 * 3600.0),
        now=now(),
    )
    await service._audit(ctx.principal, f"approval.{a.status}", a.id, a.scope, a.rule)
    return {"approval": _approval_view(a)}


@op("approvals.wait", "Wait until a held action is approved or refused")
async def approvals_wait(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    import asyncio

    from tenantry.core.errors import NotFound
    from tenantry.safety.policy.approvals import now

    ref = param(params, "id", str, required=True)
    timeout = min(max(param(params, "timeout_s", float, 300.0), 0.0), 3600.0)
    service = ctx.runtime.component("policy", PolicyService)
    deadline = now() + timeout
    delay = 0.05
    while True:
        a = service.approvals.items.get(ref)
        if a is None or a.user != ctx.principal.user:
            raise NotFound(f"no approval {ref!r}", hint="list them with `tenantry approvals`")
        if a.status != "pending" or now() >= deadline:
            return {"approval": _approval_view(a), "timed_out": a.status == "pending"}
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, 1.0)
