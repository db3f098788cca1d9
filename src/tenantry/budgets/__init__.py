"""Budgets and rate limits of agent principals."""

from __future__ import annotations

from tenantry.budgets.config import BudgetConfig, Limit
from tenantry.budgets.service import BudgetService, create, estimate

__all__ = ["BudgetConfig", "BudgetService", "Limit", "create", "estimate"]
