"""An asyncio client of the daemon: the wire codec on kept-alive Unix-socket connections.

The MCP shim and the benchmarks use it: at most ``CONNECTIONS`` requests are
in flight at once, each on its own connection, and those connections are kept
open between requests, so a tool call costs one request on an open
connection; more calls at once wait for a connection (as an HTTP client's
pool does) rather than each opening a new one the daemon must accept, check
the peer of and set up. Errors come back as the same
``TenantryError``s the synchronous client raises, and the daemon is started
on demand the same way. An environment sent once goes by its digest after.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from tenantry.client import wire
from tenantry.client.principal import client_claims
from tenantry.client.sync import HeldEnv, ensure_daemon, new_request_id
from tenantry.client.wire import API, PRINCIPAL_HEADER, REQUEST_ID_HEADER
from tenantry.core import errors
from tenantry.core.settings import Settings

CONNECTIONS = 32  # in flight at once, and kept open while idle


class AsyncClient:
    def __init__(self, settings: Settings, *, claims: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.claims = claims if claims is not None else client_claims()
        self._pool = wire.Pool(settings.socket, CONNECTIONS)
        self._slots = asyncio.Semaphore(CONNECTIONS)
        self._held = HeldEnv()

    async def aclose(self) -> None:
        self._pool.close()

    async def _send(
        self, op: str, params: dict[str, Any]
    ) -> AsyncGenerator[wire.Head | bytes, None]:
        """The response events of one request (the connection goes back to the pool after)."""
        headers = {PRINCIPAL_HEADER: json.dumps(self.claims), REQUEST_ID_HEADER: new_request_id()}
        data = wire.encode_request("POST", f"{API}/op/{op}", json.dumps(params).encode(), headers)
        async with self._slots:
            events = self._on_a_connection(data)
            try:
                async for event in events:
                    yield event
            finally:  # its connection goes back to the pool before the slot does
                await events.aclose()

    async def _on_a_connection(self, data: bytes) -> AsyncGenerator[wire.Head | bytes, None]:
        for attempt in range(2):
            conn = self._pool.checkout()
            try:
                if not conn.connected:
                    await conn.connect()
            except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
                if attempt == 0:
                    await asyncio.to_thread(ensure_daemon, self.settings)
                    continue
                raise errors.DaemonUnavailable(
                    f"no daemon answers on {self.settings.socket}",
                    hint="start one with `tenantry serve`",
                ) from exc
            except OSError as exc:
                raise errors.DaemonUnavailable(f"cannot reach the daemon: {exc}") from exc
            try:
                async for event in conn.request(data):
                    yield event
            except wire.WireError as exc:
                raise errors.DaemonUnavailable(str(exc)) from exc
            finally:
                self._pool.checkin(conn)
            return

    async def call(self, op: str, params: dict[str, Any]) -> tuple[Any, list[str]]:
        """One op: its result and any warnings that came with it."""
        body = b""
        async for event in self._send(op, params):
            if isinstance(event, bytes):
                body += event
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise errors.DaemonUnavailable("the daemon sent a response that is not JSON") from exc
        if not data.get("ok"):
            raise errors.from_dict(data.get("error") or {})
        return data.get("result"), list(data.get("warnings") or [])

    async def stream(self, op: str, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """A streaming op's chunks (the last holds ``result``)."""
        sent, whole = self._held.params(params)
        events = self._send(op, sent)
        head: wire.Head | None = None
        body = b""
        lines = wire.Lines()
        try:
            async for event in events:
                if isinstance(event, wire.Head):
                    head = event
                elif head is not None and head.content_type.startswith("application/json"):
                    body += event
                else:
                    for line in lines.feed(event):
                        chunk = json.loads(line)
                        if "error" in chunk:
                            raise errors.from_dict(chunk["error"])
                        yield chunk
        finally:
            await events.aclose()
        if head is not None and head.content_type.startswith("application/json"):
            last = self._held.answer(json.loads(body), whole)
            if last is None:
                async for chunk in self.stream(op, params):
                    yield chunk
            else:
                yield last
            return
        self._held.accepted(whole)
        for line in lines.close():
            yield json.loads(line)
