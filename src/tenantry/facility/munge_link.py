"""The executor's channel to a facility service on another login node (``munge://``).

``tenantry serve --facility munge://HOST:PORT`` reaches the service's TCP
listener (``facility.tcp``); every request carries a MUNGE credential that
``munge`` makes as this daemon's user, bound to the connection and the
request (``munge_auth``). Concurrent calls use a small pool of connections
(each carries one request at a time). ``munge://HOST:PORT?socket=PATH``
names munged's socket when it is not MUNGE's default.

A service that cannot be reached, or a munged that cannot make a credential,
is ``FacilityUnavailable`` (retryable); the service's refusals come back as
the ``TenantryError`` they were.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tenantry.core import errors
from tenantry.facility.link import claims_of
from tenantry.facility.munge_auth import MungeAuthClient, MungeCodec
from tenantry.facility.seams import FacilityChannel, FacilityRequest
from tenantry.facility.tcp import AUDIENCE, split_hostport

POOL_MAX = 8  # idle connections kept


def parse_address(address: str) -> tuple[str, int, str]:
    """``munge://HOST:PORT[?socket=PATH]`` -> host, port, munged socket."""
    parts = urlsplit(address)
    if parts.scheme != "munge":
        raise errors.UsageError(f"{address!r} is not a munge:// address")
    host, port = split_hostport(parts.netloc, "facility_address")
    socket = (parse_qs(parts.query).get("socket") or [""])[0]
    return host, port, socket


class MungeChannel(FacilityChannel):
    down_hint = (
        "retry in a moment; your own commands keep working. Check that munged runs"
        " here (systemctl status munge) and the facility service on its host"
    )

    def __init__(self, address: str, timeout_s: float) -> None:
        super().__init__(address, timeout_s)
        self.host, self.port, socket = parse_address(address)
        self.codec = MungeCodec(socket=socket, timeout_s=timeout_s)
        self._idle: list[MungeAuthClient] = []
        self._closed = False

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for client in idle:
            await client.aclose()

    async def send(self, req: FacilityRequest) -> tuple[Any, list[str]]:
        body = {"op": req.op, "params": req.params, "claims": claims_of(req.principal)}
        if req.request_id:
            body["request_id"] = req.request_id
        answer: dict[str, Any] | None = None
        for _attempt in range(2):
            reused = bool(self._idle)
            client = (
                self._idle.pop()
                if self._idle
                else MungeAuthClient(self.host, self.port, self.codec, AUDIENCE)
            )
            # the call's own timeout (a long wait) plus the slack of one round trip
            client.timeout_s = req.timeout_s + self.timeout_s
            try:
                answer = await client.exchange(body)
            except errors.Unavailable as exc:
                await client.aclose()
                # an idle connection the service closed (restarted): once more, afresh
                if reused:
                    continue
                raise self._down(exc.message) from exc
            except (OSError, TimeoutError, asyncio.IncompleteReadError) as exc:
                await client.aclose()
                if reused:
                    continue
                raise self._down(type(exc).__name__) from exc
            break
        if answer is None:
            raise self._down("the connection broke twice")
        if not answer.get("ok"):
            await client.aclose()  # the service closes a connection after a refusal
            raise errors.from_dict(answer.get("error") or {})
        if self._closed or len(self._idle) >= POOL_MAX:
            await client.aclose()
        else:
            self._idle.append(client)
        result = answer.get("result")
        if not isinstance(result, dict) or "result" not in result:
            raise self._down("not an op answer")
        return result["result"], [str(w) for w in result.get("warnings") or []]
