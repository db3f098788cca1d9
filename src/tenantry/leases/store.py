"""Lease persistence: the ``leases`` tables of the daemon's store (the user's daemon).

Leases run as the user, so they normally live in the user daemon's embedded
store; the tables migrate on PostgreSQL too.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tenantry.core.models import CommandResult
from tenantry.leases.model import ACTIVE, Lease
from tenantry.store.engine import Schema
from tenantry.store.repository import Repository

SCHEMA = Schema("leases", __package__ or "tenantry.leases", legacy_file="leases.sqlite3")


class LeaseStore(Repository):
    SCHEMA = SCHEMA

    async def save(self, lease: Lease) -> None:
        row = lease.row()
        cols = ", ".join(f'"{c}"' for c in row)
        marks = ", ".join("?" for _ in row)
        updates = ", ".join(f'"{c}"=excluded."{c}"' for c in row if c != "id")
        sql = (
            f"INSERT INTO leases ({cols}) VALUES ({marks}) ON CONFLICT(id) DO UPDATE SET {updates}"
        )
        await self.db.execute(sql, list(row.values()))

    async def save_many(self, leases: list[Lease]) -> None:
        for lease in leases:
            await self.save(lease)

    async def active(self) -> list[Lease]:
        marks = ", ".join("?" for _ in ACTIVE)
        rows = await self.db.fetchall(f"SELECT * FROM leases WHERE state IN ({marks})", ACTIVE)
        return [Lease.from_row(r) for r in rows]

    async def recent(self, limit: int = 50) -> list[Lease]:
        rows = await self.db.fetchall(
            "SELECT * FROM leases ORDER BY created_at DESC LIMIT ?", (limit,)
        )
        return [Lease.from_row(r) for r in rows]

    async def put_result(self, lease_id: str, result: CommandResult) -> None:
        await self.db.execute(
            "INSERT INTO lease_results VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE"
            " SET lease_id = excluded.lease_id, result = excluded.result,"
            " finished_at = excluded.finished_at",
            (result.id, lease_id, json.dumps(result.to_dict()), time.time()),
        )

    async def result(self, command_id: str) -> dict[str, Any] | None:
        row = await self.db.fetchone("SELECT result FROM lease_results WHERE id = ?", (command_id,))
        return None if row is None else dict(json.loads(row["result"]))

    async def get_meta(self, key: str) -> str | None:
        row = await self.db.fetchone("SELECT value FROM lease_meta WHERE key = ?", (key,))
        return None if row is None else str(row["value"])

    async def set_meta(self, key: str, value: str) -> None:
        await self.db.execute(
            "INSERT INTO lease_meta VALUES (?, ?)"
            " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )
