"""One leader among the facility replicas, chosen with a PostgreSQL advisory lock.

Each replica runs :meth:`LeaderElection.run`: it opens a dedicated connection
and tries ``pg_try_advisory_lock(key)`` every ``retry_s``. The replica whose
session holds the lock is the leader and runs ``lead(conn)`` (the poller and
any other singleton) *on that same connection*, so its writes are fenced: a
leader whose session died cannot write, and its lock is already free for the
next one. Leadership ends when the connection dies, when a heartbeat
(``SELECT 1`` every ``check_s``, bounded by ``check_timeout_s``) fails, or when
``lead`` returns or raises; then the replica competes again.

A killed leader's session ends when PostgreSQL sees its socket close (at once
for a dead process; after the TCP keepalives below for a dead host), so a
follower takes over within ``retry_s`` plus that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import psycopg

__all__ = ["DEFAULT_LOCK_KEY", "LeaderElection", "connect"]

log = logging.getLogger(__name__)

DEFAULT_LOCK_KEY = 0x7E1A_0016_0000_0002  # "tenantry facility leader"
# Server-side keepalives of the lock session: a leader host that vanished without
# closing its socket frees the lock after ~idle + interval * count seconds.
_SESSION_KEEPALIVE = ("SET tcp_keepalives_idle = 2; SET tcp_keepalives_interval = 1; "
                      "SET tcp_keepalives_count = 2")  # fmt: skip

AConn = psycopg.AsyncConnection[tuple[object, ...]]
Lead = Callable[[AConn], Coroutine[Any, Any, None]]


async def connect(dsn: str, *, timeout_s: float = 5.0) -> AConn:
    """An autocommit connection with client keepalives (``dsn`` as libpq takes it)."""
    return await psycopg.AsyncConnection.connect(
        dsn,
        autocommit=True,
        connect_timeout=max(1, int(timeout_s)),
        keepalives=1,
        keepalives_idle=2,
        keepalives_interval=1,
        keepalives_count=2,
    )


@dataclass(slots=True)
class LeaderElection:
    """Compete for leadership forever; run ``lead`` while leader."""

    dsn: str
    lead: Lead
    name: str = ""
    key: int = DEFAULT_LOCK_KEY
    retry_s: float = 0.5
    check_s: float = 1.0
    check_timeout_s: float = 3.0
    is_leader: bool = False
    terms: int = 0  # how many times this replica became leader
    since: float | None = None  # when the current term began (time.time())
    last_error: str = ""
    backend_pid: int | None = None  # the PostgreSQL backend of the lock session
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        while True:
            try:
                await self._term()
            except (psycopg.Error, OSError, TimeoutError) as exc:
                self.last_error = str(exc) or type(exc).__name__
                log.warning("leader election (%s): %s", self.name, self.last_error)
            await asyncio.sleep(self.retry_s)

    async def wait_leader(self, timeout_s: float) -> bool:
        """True once this replica leads (within ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        while not self.is_leader:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self._changed.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._changed.wait()
        return True

    async def _term(self) -> None:
        conn = await connect(self.dsn)
        self.backend_pid = conn.info.backend_pid
        try:
            await conn.execute(_SESSION_KEEPALIVE.encode())
            while not await self._try_lock(conn):
                await asyncio.sleep(self.retry_s)
            self._set(True)
            log.info("replica %s is the facility leader", self.name)
            work = asyncio.create_task(self.lead(conn), name=f"facility-lead:{self.name}")
            beat = asyncio.create_task(self._heartbeat(conn), name=f"facility-beat:{self.name}")
            try:
                done, _ = await asyncio.wait({work, beat}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for t in (work, beat):
                    t.cancel()
                await asyncio.gather(work, beat, return_exceptions=True)
            for t in done:
                exc = t.exception()
                if exc is not None:
                    raise exc
        finally:
            self._set(False)
            with contextlib.suppress(Exception):
                await conn.close()

    async def _try_lock(self, conn: AConn) -> bool:
        cur = await conn.execute("SELECT pg_try_advisory_lock(%s)", (self.key,))
        row = await cur.fetchone()
        return bool(row and row[0])

    async def _heartbeat(self, conn: AConn) -> None:
        while True:
            await asyncio.sleep(self.check_s)
            async with asyncio.timeout(self.check_timeout_s):
                await conn.execute("SELECT 1")

    def _set(self, leader: bool) -> None:
        if leader:
            self.terms += 1
            self.since = time.time()
        elif self.is_leader:
            log.warning("replica %s lost the facility leadership", self.name)
            self.since = None
        self.is_leader = leader
        self._changed.set()
