"""Budgets and rate limits of agent principals."""

from __future__ import annotations

from tenantry.safety.budgets.config import BudgetConfig, Limit
from tenantry.safety.budgets.service import BudgetService, create, estimate

__all__ = ["BudgetConfig", "BudgetService", "Limit", "create", "estimate"]
