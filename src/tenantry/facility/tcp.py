"""The facility service's TCP listener for other login nodes (``facility_tcp``).

``SO_PEERCRED`` means nothing across hosts, so a user daemon on another login
node proves its uid with a MUNGE credential per request
(``munge_auth.MungeAuthServer``). Each verified request is one op, answered by
``FacilityService.call`` for the peer munged named: the same principal, gates
and op as the Unix socket. The request frame's body is::

    {"op": "facility.decide", "params": {...}, "claims": {agent, session, ...}}

The uid is munged's, never the body's: ``claims`` only describe the caller's
own principals, as the Unix socket's principal header does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.facility.munge_auth import MungeAuthServer, MungeCodec, MungeIdentity
from tenantry.facility.seams import Peer
from tenantry.facility.service import FacilityService
from tenantry.service.runtime import Runtime

log = logging.getLogger(__name__)

AUDIENCE = "tenantry-facility"


def split_hostport(value: str, what: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise UsageError(f"{what} {value!r} is not HOST:PORT", hint="e.g. 10.0.0.1:7070")
    return host.strip("[]"), int(port)


def request_of(body: Mapping[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The op, its parameters and the caller's claims of one verified request body."""
    op, params, claims = body.get("op"), body.get("params", {}), body.get("claims", {})
    if not isinstance(op, str) or not op:
        raise UsageError("a facility request needs an op name", hint='{"op": "facility.whoami"}')
    if not isinstance(params, dict) or not isinstance(claims, dict):
        raise UsageError("a facility request's params and claims must be JSON objects")
    return op, params, claims


class TcpListener:
    """A component of ``tenantry facility serve``: inert unless ``facility_tcp`` is set."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.address = str(runtime.settings.facility_tcp)
        self.server: MungeAuthServer | None = None

    def _service(self) -> FacilityService:
        service = self.runtime.gates.get("facility")
        if not isinstance(service, FacilityService):
            raise UsageError(
                "facility_tcp is set but this is not a facility service",
                hint="facility_tcp is a setting of `tenantry facility serve`",
            )
        return service

    async def handle(self, ident: MungeIdentity, body: dict[str, Any]) -> Mapping[str, Any]:
        op, params, claims = request_of(body)
        peer = Peer(uid=ident.uid, gid=ident.gid, host=ident.host, via="munge")
        return await self._service().call(peer, claims, op, params)

    async def start(self) -> None:
        if not self.address:
            return
        self._service()  # fail at start, not at the first request
        host, port = split_hostport(self.address, "facility_tcp")
        codec = MungeCodec(socket=str(self.runtime.settings.munge_socket))
        self.server = MungeAuthServer(self.handle, codec, AUDIENCE, host, port)
        await self.server.start()
        log.info("facility service: MUNGE-authenticated TCP on %s:%d", host, self.server.port)

    async def aclose(self) -> None:
        if self.server is not None:
            await self.server.aclose()
            self.server = None


def create(runtime: Runtime) -> TcpListener:
    return TcpListener(runtime)
