"""Policy ops: ``policy.check`` (a dry-run decision with the deciding rule)."""

from __future__ import annotations

import dataclasses
from typing import Any

from tenantry.errors import UsageError
from tenantry.models import AgentProduct
from tenantry.ops import OpContext, op, param
from tenantry.policy.component import PolicyService


@op("policy.check", "Dry-run one policy decision and name the rule that decides it")
async def check(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    """Params: ``action``, ``params`` (the op params to judge), optional ``agent``/``session``.

    Judging as another agent product or session of the *same* user is allowed:
    a dry run grants nothing.
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
    return service.check(principal, action, inner).to_dict()
