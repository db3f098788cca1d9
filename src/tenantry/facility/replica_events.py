"""Replicas see each other's job and kill-switch events at once (the shared journal).

Every replica writes the events its executors send, and the stops its staff
set, to the journal on the one PostgreSQL. :class:`ReplicaEvents` makes them
visible on the other replicas without a restart: a replica that recorded such
an event flushes its journal and sends ``NOTIFY`` on :data:`CHANNEL`; every
replica ``LISTEN``\\ s, and after each notification (and every ``resync_s``, in
case one is lost while reconnecting) reads the journal's events of
:data:`FOLLOWED` types after the last id it applied, and hands each to
``apply`` (the service adds it to its job view, or reloads its kill switch).

Ids of concurrent transactions may commit out of order, so each read looks
back :data:`LOOKBACK_IDS` ids and skips those already applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import psycopg

from tenantry.core.events import EventType
from tenantry.core.tasks import TaskGroup
from tenantry.facility.jobview import JOB_EVENTS
from tenantry.facility.leader import AConn
from tenantry.facility.pg_listen import connected, follow_channel

__all__ = ["CHANNEL", "FOLLOWED", "EventLog", "ReplicaEvents"]

log = logging.getLogger(__name__)

CHANNEL = "tenantry_facility_events"
STOPS = (EventType.SESSION_STOPPED, EventType.SESSION_RESUMED)
FOLLOWED: tuple[str, ...] = tuple(t.value for t in (*JOB_EVENTS, *STOPS))
LOOKBACK_IDS = 1_000
PAGE = 5_000

Apply = Callable[[dict[str, Any]], Awaitable[None]]


class EventLog(Protocol):
    """The journal's reads by id (``store.journal.Journal``)."""

    async def events_after(
        self, after_id: int, *, types: Sequence[str] = (), limit: int = 1000
    ) -> list[dict[str, Any]]: ...

    async def last_event_id(self) -> int: ...

    async def flush(self) -> None: ...


@dataclass(slots=True)
class ReplicaEvents:
    """Follow the other replicas' events; announce this one's. Lifecycle: start/aclose."""

    dsn: str
    journal: EventLog
    apply: Apply
    name: str
    _seen: set[int] = field(default_factory=set)  # ids applied within the lookback
    resync_s: float = 1.0
    _dirty: asyncio.Event = field(default_factory=asyncio.Event)
    last_id: int = 0
    _tasks: TaskGroup = field(default_factory=lambda: TaskGroup("facility-replica-events"))
    applied: int = 0

    async def start(self) -> None:
        self.last_id = await self.journal.last_event_id()
        self._tasks.supervise("replica-events-follow", self._follow)
        self._tasks.supervise("replica-events-announce", self._announce)

    async def aclose(self) -> None:
        await self._tasks.aclose()

    def announce(self) -> None:
        """This replica recorded a followed event: tell the others (soon, batched)."""
        self._dirty.set()

    async def _announce(self) -> None:
        what = f"replica {self.name}'s announcer"
        while True:
            conn = await connected(self.dsn, self.resync_s, what)
            try:
                while True:
                    await self._dirty.wait()
                    self._dirty.clear()
                    await self.journal.flush()  # the others read what the notice announces
                    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self.name))
            except psycopg.Error as exc:
                log.warning("%s lost its connection: %s", what, exc)
                self._dirty.set()  # announce again on the next connection
            finally:
                with contextlib.suppress(Exception):
                    await conn.close()

    async def catch_up(self) -> int:
        """Apply the followed events recorded since the last read; returns how many."""
        n = 0
        cursor = max(0, self.last_id - LOOKBACK_IDS)
        while True:
            rows = await self.journal.events_after(cursor, types=FOLLOWED, limit=PAGE)
            for row in rows:
                rid = cursor = int(row["id"])
                if rid in self._seen:
                    continue
                self._seen.add(rid)
                self.last_id = max(self.last_id, rid)
                await self.apply(row)
                n += 1
            if len(rows) < PAGE:
                break
        self._seen = {i for i in self._seen if i > self.last_id - LOOKBACK_IDS}
        self.applied += n
        return n

    async def _wake(self, conn: AConn) -> None:
        await self.catch_up()

    async def _follow(self) -> None:
        await follow_channel(
            self.dsn, CHANNEL, self._wake, resync_s=self.resync_s,
            what=f"replica {self.name}'s follower",
        )  # fmt: skip
