"""Budget ops: what an agent (or its user) has left, and when it resets."""

from __future__ import annotations

from typing import Any

from tenantry.safety.budgets.service import BudgetService
from tenantry.service.ops import OpContext, op


@op("budgets.show", "Your budgets and rate limits: used, limit, reset time")
async def show(ctx: OpContext, params: dict[str, Any]) -> dict[str, Any]:
    service = ctx.runtime.component("budgets", BudgetService)
    return {"principal": ctx.principal.key, "budgets": await service.status(ctx.principal)}
