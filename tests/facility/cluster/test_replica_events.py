"""A replica applies each of the others' journaled events once, late commits included."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tenantry.facility.replica_events import FOLLOWED, ReplicaEvents


class Journal:
    """Rows by id, as the shared journal returns them (only committed rows are visible)."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, Any]] = {}

    def commit(self, rid: int, kind: str = "job.state") -> None:
        self.rows[rid] = {"id": rid, "type": kind, "subject": f"j{rid}"}

    async def events_after(
        self, after_id: int, *, types: Sequence[str] = (), limit: int = 1000
    ) -> list[dict[str, Any]]:
        found = [r for i, r in sorted(self.rows.items()) if i > after_id and r["type"] in types]
        return found[:limit]

    async def last_event_id(self) -> int:
        return max(self.rows, default=0)

    async def flush(self) -> None:
        return None


async def test_each_event_once_and_a_late_commit_below_the_last_id_too() -> None:
    journal = Journal()
    applied: list[int] = []

    async def apply(row: dict[str, Any]) -> None:
        applied.append(int(row["id"]))

    journal.commit(1)
    follower = ReplicaEvents("postgresql://unused", journal, apply, "b")
    follower.last_id = await journal.last_event_id()  # what start() does
    journal.commit(3)
    journal.commit(4, "command.started")  # not followed
    assert "command.started" not in FOLLOWED
    assert await follower.catch_up() == 2  # 1 again (within the look-back) and 3
    assert sorted(applied) == [1, 3]
    journal.commit(2, "session.stopped")  # a transaction that took id 2 commits after 3
    journal.commit(5)
    assert await follower.catch_up() == 2
    assert applied[-2:] == [2, 5] and follower.last_id == 5
    assert await follower.catch_up() == 0  # nothing twice
