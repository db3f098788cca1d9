"""The budgets repository: usage rows, jobs in flight, leases held.

All SQL on the budgets tables lives here. The service composes a charge's
check and record into one write transaction from the ``Conn``-level functions
below; ``lock`` serialises the charges of one scope across processes (on
PostgreSQL several facility replicas write the same rows; SQLite's single
writer already serialises them).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from tenantry.store.engine import Conn, Schema
from tenantry.store.repository import Repository

SCHEMA = Schema(
    "budgets",
    __package__ or "tenantry.safety.budgets",
    legacy_file="budgets.sqlite3",
    renames={"leases": "budget_leases"},
)


class UsageRow(NamedTuple):
    """One row of ``usage``: ``amount`` of ``metric`` charged at ``ts``."""

    ts: float
    user: str
    principal: str
    metric: str
    amount: float
    action: str = ""
    ref: str = ""


def _col(scope: str) -> str:
    return "principal" if scope == "session" else '"user"'


class BudgetStore(Repository):
    SCHEMA = SCHEMA

    # -- inside a transaction (the service's charge) ----------------------------------
    def lock(self, conn: Conn, key: str) -> None:
        """Hold ``key`` until the transaction ends (no-op where writes are serial already)."""
        if self.db.engine == "postgresql":
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(?))", ("budgets:" + key,))

    @staticmethod
    def leases_held(conn: Conn, scope: str, key: str) -> float:
        row = conn.execute(
            f"SELECT COUNT(*) FROM budget_leases WHERE {_col(scope)} = ?", (key,)
        ).fetchone()
        return float(row[0])

    @staticmethod
    def used(conn: Conn, scope: str, key: str, metric: str, since: float) -> float:
        row = conn.execute(
            f"SELECT COALESCE(SUM(amount), 0) FROM usage"
            f" WHERE {_col(scope)} = ? AND metric = ? AND ts >= ?",
            (key, metric, since),
        ).fetchone()
        return float(row[0])

    @staticmethod
    def committed(conn: Conn, scope: str, key: str, factor: str) -> float:
        """Estimated hours x ``factor`` (cpus | gpus) of the jobs still in flight."""
        assert factor in ("cpus", "gpus")
        row = conn.execute(
            f"SELECT COALESCE(SUM({factor} * est_hours), 0) FROM inflight WHERE {_col(scope)} = ?",
            (key,),
        ).fetchone()
        return float(row[0])

    @staticmethod
    def add_usage(conn: Conn, row: UsageRow) -> None:
        conn.execute(
            'INSERT INTO usage (ts, "user", principal, metric, amount, action, ref)'
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            row,
        )

    @staticmethod
    def take_inflight(conn: Conn, job_id: str) -> dict[str, Any] | None:
        """Remove a job from the in-flight table; returns its row (None if unknown)."""
        row = conn.execute("SELECT * FROM inflight WHERE job_id = ?", (job_id,)).fetchone()
        if row is None:
            return None
        conn.execute("DELETE FROM inflight WHERE job_id = ?", (job_id,))
        return dict(row)

    # -- one statement each -----------------------------------------------------------
    async def record(self, row: UsageRow) -> None:
        await self.db.write(lambda c: self.add_usage(c, row))

    async def lease_held(self, lease_id: str, user: str, principal: str, ts: float) -> None:
        await self.db.execute(
            'INSERT INTO budget_leases (lease_id, "user", principal, ts) VALUES (?, ?, ?, ?)'
            ' ON CONFLICT (lease_id) DO UPDATE SET "user" = excluded."user",'
            " principal = excluded.principal, ts = excluded.ts",
            (lease_id, user, principal, ts),
        )

    async def lease_gone(self, lease_id: str) -> None:
        await self.db.execute("DELETE FROM budget_leases WHERE lease_id = ?", (lease_id,))

    async def job_inflight(
        self,
        job_id: str,
        user: str,
        principal: str,
        cpus: float,
        gpus: float,
        est_hours: float,
        submitted_at: float,
    ) -> None:
        await self.db.execute(
            'INSERT INTO inflight (job_id, "user", principal, cpus, gpus, est_hours,'
            " submitted_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING",
            (job_id, user, principal, cpus, gpus, est_hours, submitted_at),
        )

    async def job_started(self, job_id: str, ts: float) -> None:
        await self.db.execute(
            "UPDATE inflight SET started_at = COALESCE(started_at, ?) WHERE job_id = ?",
            (ts, job_id),
        )
