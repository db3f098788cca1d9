"""An asyncio client of the daemon (httpx over the Unix socket, kept alive).

The MCP shim uses it: one persistent connection pool per shim process, so a
tool call costs one request on an open connection instead of a thread hop and
a new connection. Errors come back as the same ``TenantryError``s the
synchronous client raises, and the daemon is started on demand the same way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from tenantry.client.principal import client_claims
from tenantry.client.sync import (
    API,
    PRINCIPAL_HEADER,
    REQUEST_ID_HEADER,
    ensure_daemon,
    new_request_id,
)
from tenantry.core import errors
from tenantry.core.settings import Settings


class AsyncClient:
    def __init__(self, settings: Settings, *, claims: dict[str, str] | None = None) -> None:
        self.settings = settings
        self.claims = claims if claims is not None else client_claims()
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=self.settings.socket),
                base_url="http://tenantry",
                headers={PRINCIPAL_HEADER: json.dumps(self.claims)},
                timeout=httpx.Timeout(None, connect=10.0),
            )
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _send(self, op: str, params: dict[str, Any]) -> httpx.Response:
        # one request id for every attempt of this call (idempotent retries)
        request = self._client().build_request(
            "POST",
            f"{API}/op/{op}",
            json=params,
            headers={
                PRINCIPAL_HEADER: json.dumps(self.claims),
                REQUEST_ID_HEADER: new_request_id(),
            },
        )
        for attempt in range(2):
            try:
                return await self._client().send(request, stream=True)
            except (httpx.ConnectError, FileNotFoundError, ConnectionRefusedError) as exc:
                if attempt == 0:
                    await asyncio.to_thread(ensure_daemon, self.settings)
                    continue
                raise errors.DaemonUnavailable(
                    f"no daemon answers on {self.settings.socket}",
                    hint="start one with `tenantry serve`",
                ) from exc
            except httpx.HTTPError as exc:
                raise errors.DaemonUnavailable(f"lost the connection to the daemon: {exc}") from exc
        raise AssertionError("unreachable")

    async def call(self, op: str, params: dict[str, Any]) -> tuple[Any, list[str]]:
        """One op: its result and any warnings that came with it."""
        resp = await self._send(op, params)
        try:
            data = json.loads(await resp.aread())
        except ValueError as exc:
            raise errors.DaemonUnavailable("the daemon sent a response that is not JSON") from exc
        finally:
            await resp.aclose()
        if not data.get("ok"):
            raise errors.from_dict(data.get("error") or {})
        return data.get("result"), list(data.get("warnings") or [])

    async def stream(self, op: str, params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """A streaming op's chunks (the last holds ``result``)."""
        resp = await self._send(op, params)
        try:
            if resp.headers.get("content-type", "").startswith("application/json"):
                data = json.loads(await resp.aread())
                if not data.get("ok"):
                    raise errors.from_dict(data.get("error") or {})
                yield {"result": data.get("result")}
                return
            async for line in resp.aiter_lines():
                if not line.strip():
                    continue
                chunk = json.loads(line)
                if "error" in chunk:
                    raise errors.from_dict(chunk["error"])
                yield chunk
        finally:
            await resp.aclose()
