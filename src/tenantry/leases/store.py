"""Lease persistence: ``<state>/leases.sqlite3`` (own file, own migrations)."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from tenantry.core.models import CommandResult
from tenantry.leases.model import ACTIVE, Lease
from tenantry.store.db import Database, load_migrations


class LeaseStore:
    def __init__(self, path: str | Path) -> None:
        self.db = Database(path, load_migrations("tenantry.leases", "migrations"))

    async def start(self) -> None:
        await self.db.start()

    async def aclose(self) -> None:
        await self.db.aclose()

    async def save(self, lease: Lease) -> None:
        row = lease.row()
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        updates = ", ".join(f"{c}=excluded.{c}" for c in row if c != "id")
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
            "INSERT OR REPLACE INTO lease_results VALUES (?, ?, ?, ?)",
            (result.id, lease_id, json.dumps(result.to_dict()), time.time()),
        )

    async def result(self, command_id: str) -> dict[str, Any] | None:
        row = await self.db.fetchone("SELECT result FROM lease_results WHERE id = ?", (command_id,))
        return None if row is None else dict(json.loads(row["result"]))

    async def get_meta(self, key: str) -> str | None:
        row = await self.db.fetchone("SELECT value FROM lease_meta WHERE key = ?", (key,))
        return None if row is None else str(row["value"])

    async def set_meta(self, key: str, value: str) -> None:
        def fn(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT OR REPLACE INTO lease_meta VALUES (?, ?)", (key, value))

        await self.db.write(fn)
