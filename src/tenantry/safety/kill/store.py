"""The kill switch's repository: the ``stops`` table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tenantry.store.engine import Conn, Schema
from tenantry.store.repository import Repository

SCHEMA = Schema("kill", __package__ or "tenantry.safety.kill", legacy_file="kill.sqlite3")

StopRow = tuple[int, str, str, str, str, str, float]


class StopStore(Repository):
    SCHEMA = SCHEMA

    async def active(self) -> list[StopRow]:
        """(id, kind, target, owner, by, reason, stopped_at) of stops not resumed, oldest first."""
        rows = await self.db.fetchall(
            "SELECT id, kind, target, owner, by, reason, stopped_at FROM stops"
            " WHERE resumed_at IS NULL ORDER BY id"
        )
        return [
            (int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]), float(r[6]))
            for r in rows
        ]

    async def add(
        self, kind: str, target: str, owner: str, by: str, reason: str, now: float
    ) -> int:
        return await self.db.insert(
            "INSERT INTO stops (kind, target, owner, by, reason, stopped_at)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
            (kind, target, owner, by, reason, now),
        )

    async def set_summary(self, kind: str, target: str, summary: dict[str, Any]) -> None:
        await self.db.execute(
            "UPDATE stops SET summary_json = ?"
            " WHERE kind = ? AND target = ? AND resumed_at IS NULL",
            (json.dumps(summary), kind, target),
        )

    async def resume(self, ids: Sequence[int], by: str, now: float) -> None:
        def txn(conn: Conn) -> None:
            conn.executemany(
                "UPDATE stops SET resumed_at = ?, resumed_by = ? WHERE id = ?",
                [(now, by, i) for i in ids],
            )

        await self.db.write(txn)
