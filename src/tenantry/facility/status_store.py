"""The facility status log in PostgreSQL: the SQL of the poller's shared state.

Tables (numbered plain-SQL migrations in ``facility/migrations/``, tracked in
``facility_schema``): ``facility_status_log`` holds every change of every
job's status with its cluster-wide ``seq``; ``facility_poll`` the leader's
last poll time (followers' staleness), its name and epoch.

The leader publishes on the connection that holds the leader lock, in one
transaction per poll, with a ``NOTIFY`` on :data:`CHANNEL` (delivered at
commit); followers ``LISTEN`` and read the log from the last seq they hold.

These tables live beside the store engine's (``tenantry.store``) and use
psycopg 3 directly; the module is the only one that runs SQL on them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from importlib import resources

import psycopg
from psycopg.rows import tuple_row

from tenantry.core import errors
from tenantry.core.models import JobState
from tenantry.facility.poller import JobStatus

__all__ = [
    "CHANNEL",
    "PgPublisher",
    "PollState",
    "changes_since",
    "current_statuses",
    "migrate",
    "poll_state",
]

CHANNEL = "tenantry_facility_status"
_MIGRATION_LOCK = 0x7E1A_0016_0000_0001  # advisory xact lock: one replica migrates at a time

AConn = psycopg.AsyncConnection[tuple[object, ...]]


def _migrations() -> list[tuple[int, str]]:
    pkg = resources.files("tenantry.facility") / "migrations"
    out = []
    for f in pkg.iterdir():
        if f.name.endswith(".sql"):
            out.append((int(f.name.split("_", 1)[0]), f.read_text()))
    return sorted(out)


async def migrate(conn: AConn) -> int:
    """Apply the missing migrations (safe to race between replicas); return the version."""
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS facility_schema (version integer PRIMARY KEY)"
            )
            cur = await conn.execute("SELECT coalesce(max(version), 0) FROM facility_schema")
            row = await cur.fetchone()
            have = int(row[0]) if row else 0  # type: ignore[call-overload]
            for version, sql in _migrations():
                if version > have:
                    await conn.execute(sql.encode())  # plain SQL, several statements
                    await conn.execute(
                        "INSERT INTO facility_schema (version) VALUES (%s)", (version,)
                    )
                    have = version
            return have
    except psycopg.Error as exc:
        raise errors.StoreError(
            f"cannot migrate the facility status tables: {exc}",
            hint="check store_url and that the role owns the database",
        ) from exc


@dataclass(frozen=True, slots=True)
class PollState:
    observed_at: float
    leader: str
    epoch: int


async def poll_state(conn: AConn) -> PollState:
    cur = await conn.execute("SELECT observed_at, leader, epoch FROM facility_poll WHERE id = 1")
    row = await cur.fetchone()
    if row is None:
        return PollState(0.0, "", 0)
    return PollState(float(row[0]), str(row[1]), int(row[2]))  # type: ignore[arg-type, call-overload]


def _status(seq: object, body: object) -> JobStatus:
    data = body if isinstance(body, dict) else json.loads(str(body))
    return replace(JobStatus.from_dict(data), seq=int(seq))  # type: ignore[call-overload]


async def changes_since(conn: AConn, seq: int, *, limit: int = 10_000) -> list[JobStatus]:
    """Changes with seq > ``seq``, oldest first (at most ``limit``)."""
    cur = await conn.execute(
        "SELECT seq, body FROM facility_status_log WHERE seq > %s ORDER BY seq LIMIT %s",
        (seq, limit),
    )
    return [_status(s, b) for s, b in await cur.fetchall()]


_ACTIVE = [s.value for s in JobState if not s.terminal]


async def current_statuses(
    conn: AConn, *, history: int = 32, ended_after: float = 0.0
) -> list[JobStatus]:
    """The last ``history`` changes of every job still active or that ended after
    ``ended_after`` (what a replica loads at start), oldest first."""
    cur = await conn.execute(
        """WITH latest AS (
               SELECT DISTINCT ON (job_id) job_id, body->>'state' AS state, observed_at
               FROM facility_status_log ORDER BY job_id, seq DESC),
           keep AS (
               SELECT job_id FROM latest WHERE state = ANY(%s) OR observed_at > %s)
           SELECT seq, body FROM (
               SELECT l.seq, l.body,
                      row_number() OVER (PARTITION BY l.job_id ORDER BY l.seq DESC) AS r
               FROM facility_status_log AS l JOIN keep USING (job_id)) AS t
           WHERE r <= %s ORDER BY seq""",
        (_ACTIVE, ended_after, history),
    )
    return [_status(s, b) for s, b in await cur.fetchall()]


class PgPublisher:
    """Publishes a poll's changes in one transaction on the leader's own connection."""

    def __init__(self, conn: AConn, leader: str) -> None:
        self.conn = conn
        self.leader = leader

    async def become_leader(self) -> int:
        """Record this replica as leader; returns the new epoch."""
        async with self.conn.transaction():
            cur = await self.conn.execute(
                "UPDATE facility_poll SET leader = %s, epoch = epoch + 1 WHERE id = 1 "
                "RETURNING epoch",
                (self.leader,),
            )
            row = await cur.fetchone()
        return int(row[0]) if row else 0  # type: ignore[call-overload]

    async def publish(self, changes: Sequence[JobStatus], observed_at: float) -> list[JobStatus]:
        out: list[JobStatus] = []
        async with self.conn.transaction():
            async with self.conn.cursor(row_factory=tuple_row) as cur:
                for ch in changes:
                    await cur.execute(
                        "INSERT INTO facility_status_log (job_id, user_name, body, observed_at) "
                        "VALUES (%s, %s, %s::jsonb, %s) RETURNING seq",
                        (ch.job_id, ch.user, json.dumps(ch.to_dict()), observed_at),
                    )
                    row = await cur.fetchone()
                    assert row is not None
                    out.append(replace(ch, seq=int(row[0])))
            await self.conn.execute(
                "UPDATE facility_poll SET observed_at = %s WHERE id = 1", (observed_at,)
            )
            payload = json.dumps({"seq": out[-1].seq if out else 0, "observed_at": observed_at})
            await self.conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
        return out
