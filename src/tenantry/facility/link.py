"""The executor's connection to the facility service (httpx over its Unix socket).

Every call carries the principal it is made for in the principal header; the
service takes the uid from the socket and refuses anything of another user.
A service that cannot be reached, or answers with something that is not its
JSON envelope, becomes ``FacilityUnavailable`` (retryable); the service's own
refusals come back as the same ``TenantryError`` they were there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx

from tenantry.core import errors
from tenantry.core.models import Principal
from tenantry.facility.seams import CLAIMS, FacilityChannel, FacilityRequest

API = "/v1/op/"
PRINCIPAL_HEADER = "X-Tenantry-Principal"
REQUEST_ID_HEADER = "X-Tenantry-Request-Id"


def claims_of(p: Principal) -> dict[str, str]:
    """What the executor verified about a principal (the service adds the uid)."""
    wire = p.to_dict()
    return {key: wire[key] for key in CLAIMS}


class FacilityLink(FacilityChannel):
    down_hint = (
        "retry in a moment; your own commands keep working. Staff: check"
        " `systemctl status tenantry-facility`"
    )

    _http: httpx.AsyncClient | None = None  # opened on the first call

    def _client(self) -> httpx.AsyncClient:
        if self._http is None:
            self._http = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=self.address),
                base_url="http://facility",
                timeout=httpx.Timeout(self.timeout_s),
                limits=httpx.Limits(max_connections=32, max_keepalive_connections=8),
            )
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def send(self, req: FacilityRequest) -> tuple[Any, list[str]]:
        headers = {PRINCIPAL_HEADER: json.dumps(claims_of(req.principal))}
        if req.request_id:
            headers[REQUEST_ID_HEADER] = req.request_id
        try:
            resp = await self._client().post(
                API + req.op,
                json=req.params,
                headers=headers,
                timeout=httpx.Timeout(req.timeout_s),
            )
        except (httpx.TransportError, OSError) as exc:
            raise self._down(type(exc).__name__) from exc
        try:
            data = resp.json()
        except ValueError as exc:
            raise self._down(f"HTTP {resp.status_code}, not JSON") from exc
        if not isinstance(data, dict) or "ok" not in data:
            raise self._down(f"HTTP {resp.status_code}, not an op envelope")
        if not data["ok"]:
            raise errors.from_dict(data.get("error") or {})
        return data.get("result"), [str(w) for w in data.get("warnings") or []]


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
