"""Follow a PostgreSQL ``NOTIFY`` channel across reconnects (the replicas' wake-up).

:func:`follow_channel` keeps a ``LISTEN`` connection open and calls ``on_wake``
with it at once, after each notification and every ``resync_s`` (a notice sent
while the connection was being re-established is lost; the periodic call reads
what it announced anyway). :func:`connected` opens a connection, retrying every
``pause_s`` until the database answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import psycopg

from tenantry.facility.leader import AConn, connect

__all__ = ["connected", "follow_channel"]

log = logging.getLogger(__name__)


async def connected(dsn: str, pause_s: float, what: str) -> AConn:
    """An autocommit connection, once the database answers (``what`` names it in logs)."""
    while True:
        try:
            return await connect(dsn)
        except psycopg.Error as exc:
            log.warning("%s cannot connect: %s", what, exc)
            await asyncio.sleep(pause_s)


async def follow_channel(
    dsn: str,
    channel: str,
    on_wake: Callable[[AConn], Awaitable[None]],
    *,
    resync_s: float,
    what: str,
    on_state: Callable[[bool], None] | None = None,
) -> None:
    """Forever: LISTEN on ``channel``; ``on_wake(conn)`` now, on each notice, every resync_s."""
    while True:
        conn = await connected(dsn, resync_s, what)
        try:
            await conn.execute(f"LISTEN {channel}".encode())
            if on_state is not None:
                on_state(True)
            while True:
                await on_wake(conn)
                async for _note in conn.notifies(timeout=resync_s, stop_after=1):
                    pass
        except psycopg.Error as exc:
            log.warning("%s lost its connection: %s", what, exc)
        finally:
            if on_state is not None:
                on_state(False)
            with contextlib.suppress(Exception):
                await conn.close()
        await asyncio.sleep(resync_s)
