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
from typing import Any, Protocol

import psycopg

from tenantry.core.events import EventType
from tenantry.core.tasks import TaskGroup
from tenantry.facility.jobview import JOB_EVENTS
from tenantry.facility.leader import connect

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


class ReplicaEvents:
    """Follow the other replicas' events; announce this one's. Lifecycle: start/aclose."""

    def __init__(
        self, dsn: str, journal: EventLog, apply: Apply, *, name: str, resync_s: float = 1.0
    ) -> None:
        self.dsn = dsn
        self.journal = journal
        self.apply = apply
        self.name = name
        self.resync_s = resync_s
        self.last_id = 0
        self.applied = 0
        self._seen: set[int] = set()
        self._dirty = asyncio.Event()
        self._tasks = TaskGroup("facility-replica-events")

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
        while True:
            try:
                conn = await connect(self.dsn)
            except psycopg.Error as exc:
                log.warning("replica %s cannot announce its events: %s", self.name, exc)
                await asyncio.sleep(self.resync_s)
                continue
            try:
                while True:
                    await self._dirty.wait()
                    self._dirty.clear()
                    await self.journal.flush()  # the others read what the notice announces
                    await conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self.name))
            except psycopg.Error as exc:
                log.warning("replica %s lost its announcing connection: %s", self.name, exc)
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

    async def _follow(self) -> None:
        while True:
            try:
                conn = await connect(self.dsn)
            except psycopg.Error as exc:
                log.warning("replica %s cannot follow the others' events: %s", self.name, exc)
                await asyncio.sleep(self.resync_s)
                continue
            try:
                await conn.execute(f"LISTEN {CHANNEL}".encode())
                while True:
                    await self.catch_up()
                    async for _note in conn.notifies(timeout=self.resync_s, stop_after=1):
                        pass
            except psycopg.Error as exc:
                log.warning("replica %s lost its following connection: %s", self.name, exc)
            finally:
                with contextlib.suppress(Exception):
                    await conn.close()
            await asyncio.sleep(self.resync_s)
