"""The executor's connection to the facility service (the wire codec over its Unix socket).

Every call carries the principal it is made for in the principal header; the
service takes the uid from the socket and refuses anything of another user.
Requests go out with ``client.wire`` -- the codec the CLI, the hooks and the
MCP shim speak to a daemon -- on kept-alive connections, at most
``CONNECTIONS`` in flight (more wait for one), each bounded by its request's
timeout. A service that cannot be reached, or answers with something that is
not its JSON envelope, becomes ``FacilityUnavailable`` (retryable); the
service's own refusals come back as the same ``TenantryError`` they were
there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from tenantry.client import wire
from tenantry.core import errors
from tenantry.core.models import Principal
from tenantry.facility.seams import CLAIMS, FacilityChannel, FacilityRequest

OPS = f"{wire.API}/op/"
CONNECTIONS = 32  # requests in flight at once, and connections kept open while idle


def claims_of(p: Principal) -> dict[str, str]:
    """What the executor verified about a principal (the service adds the uid)."""
    wire_form = p.to_dict()
    return {key: wire_form[key] for key in CLAIMS}


class FacilityLink(FacilityChannel):
    down_hint = (
        "retry in a moment; your own commands keep working. Staff: check"
        " `systemctl status tenantry-facility`"
    )

    def __init__(self, address: str, timeout_s: float) -> None:
        super().__init__(address, timeout_s)
        self._pool = wire.Pool(address, CONNECTIONS)
        self._slots = asyncio.Semaphore(CONNECTIONS)

    async def aclose(self) -> None:
        self._pool.close()

    async def send(self, req: FacilityRequest) -> tuple[Any, list[str]]:
        headers = {wire.PRINCIPAL_HEADER: json.dumps(claims_of(req.principal))}
        if req.request_id:
            headers[wire.REQUEST_ID_HEADER] = req.request_id
        try:
            data = wire.encode_request(
                "POST", OPS + req.op, json.dumps(req.params).encode(), headers
            )
        except ValueError as exc:  # a line break or a non-Latin-1 character in a header
            raise errors.UsageError(f"cannot send {req.op} to the facility: {exc}") from exc
        try:
            async with asyncio.timeout(req.timeout_s), self._slots:
                status, body = await self._exchange(data)
        except (OSError, wire.WireError, TimeoutError) as exc:
            raise self._down(type(exc).__name__) from exc
        try:
            answer = json.loads(body)
        except ValueError as exc:
            raise self._down(f"HTTP {status}, not JSON") from exc
        if not isinstance(answer, dict) or "ok" not in answer:
            raise self._down(f"HTTP {status}, not an op envelope")
        if not answer["ok"]:
            raise errors.from_dict(answer.get("error") or {})
        return answer.get("result"), [str(w) for w in answer.get("warnings") or []]

    async def _exchange(self, data: bytes) -> tuple[int, bytes]:
        """One request on a kept-alive connection: the status and the whole body."""
        conn = self._pool.checkout()
        status, body = 0, b""
        events = conn.request(data)
        try:
            async for event in events:
                if isinstance(event, wire.Head):
                    status = event.status
                else:
                    body += event
        finally:
            await events.aclose()  # cut short (a timeout): the connection is closed, not reused
            self._pool.checkin(conn)
        return status, body


ChannelFactory = Callable[[str, float], FacilityChannel]
# address scheme -> channel factory, for services not on this host (e.g. "munge")
CHANNELS: dict[str, ChannelFactory] = {}


def _munge_channel(address: str, timeout_s: float) -> FacilityChannel:
    from tenantry.facility.munge_link import MungeChannel  # imports this module

    return MungeChannel(address, timeout_s)


CHANNELS["munge"] = _munge_channel  # a service on another login node: TCP + MUNGE


def open_channel(address: str, timeout_s: float) -> FacilityChannel:
    """The channel for ``facility_address``: a socket path, or ``SCHEME://...``."""
    scheme, sep, _rest = address.partition("://")
    if not sep or scheme == "unix":
        return FacilityLink(address.removeprefix("unix://"), timeout_s)
    factory = CHANNELS.get(scheme)
    if factory is None:
        raise errors.UsageError(
            f"facility_address {address!r}: no channel for {scheme}://",
            hint="use the facility socket's path on this host"
            + (f", or one of {', '.join(sorted(CHANNELS))}://" if CHANNELS else ""),
        )
    return factory(address, timeout_s)
