"""The executor's link to the facility service: the wire codec on kept-alive connections."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from tenantry.core.errors import FacilityUnavailable, PermissionDenied
from tenantry.core.models import AgentProduct, Principal
from tenantry.facility.link import CONNECTIONS, FacilityLink

ME = Principal(uid=os.getuid(), user="alice", agent=AgentProduct.CODEX, session="s1")
# (op, principal claims, request id, body) -> (status, body bytes, close after)
Answer = Callable[[str, dict[str, Any], str, dict[str, Any]], Awaitable[tuple[int, bytes, bool]]]


async def envelope(
    op: str, claims: dict[str, Any], rid: str, body: dict[str, Any]
) -> tuple[int, bytes, bool]:
    result = {"op": op, "claims": claims, "rid": rid, "body": body}
    return 200, json.dumps({"ok": True, "result": result, "warnings": ["w"]}).encode(), False


class Service:
    """A stand-in for the service's HTTP endpoint: counts connections, answers by ``answer``."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.closed = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {
                    k.strip().lower(): v.strip()
                    for k, _, v in (line.partition(":") for line in lines[1:] if line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                status, out, close = await self.answer(
                    path.removeprefix("/v1/op/"),
                    json.loads(headers.get("x-tenantry-principal", "{}")),
                    headers.get("x-tenantry-request-id", ""),
                    json.loads(body or b"{}"),
                )
                writer.write(
                    f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(out)}\r\n"
                    f"connection: {'close' if close else 'keep-alive'}\r\n\r\n".encode()
                    + out
                )
                await writer.drain()
                if close:
                    return
        finally:
            self.closed += 1
            writer.close()


@asynccontextmanager
async def serving(answer: Answer = envelope) -> AsyncIterator[tuple[Service, str]]:
    with tempfile.TemporaryDirectory(prefix="tlink") as d:  # AF_UNIX paths are short
        path = os.path.join(d, "facility.sock")
        service = Service(answer)
        server = await asyncio.start_unix_server(service.handle, path)
        try:
            yield service, path
        finally:
            server.close()


async def test_calls_share_one_kept_alive_connection_and_carry_the_principal() -> None:
    async with serving() as (service, path):
        link = FacilityLink(path, 5.0)
        for i in range(20):
            result, warnings = await link.call(
                ME, "facility.decide", {"op": "commands.run", "i": i}, request_id=f"r{i}"
            )
            assert result["op"] == "facility.decide" and result["body"]["i"] == i
            assert result["rid"] == f"r{i}" and warnings == ["w"]
            assert result["claims"]["agent"] == "codex" and result["claims"]["session"] == "s1"
            assert "uid" not in result["claims"]  # the service takes it from the socket
        assert service.connections == 1
        await link.aclose()


async def test_a_burst_waits_for_a_bounded_number_of_connections() -> None:
    in_flight = peak = 0

    async def slow(op: str, claims: dict[str, Any], rid: str, body: dict[str, Any]) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return await envelope(op, claims, rid, body)

    async with serving(slow) as (service, path):
        link = FacilityLink(path, 10.0)
        answers = await asyncio.gather(
            *(link.call(ME, "facility.ingest", {"i": i}) for i in range(4 * CONNECTIONS))
        )
        assert sorted(a[0]["body"]["i"] for a in answers) == list(range(4 * CONNECTIONS))
        assert service.connections <= CONNECTIONS and peak <= CONNECTIONS
        await link.aclose()


async def test_a_service_that_does_not_answer_in_time_is_down_and_its_connection_dropped() -> None:
    stall = asyncio.Event()

    async def stalled(op: str, claims: dict[str, Any], rid: str, body: dict[str, Any]) -> Any:
        if body.get("stall"):
            await stall.wait()
        return await envelope(op, claims, rid, body)

    async with serving(stalled) as (service, path):
        link = FacilityLink(path, 5.0)
        with pytest.raises(FacilityUnavailable) as info:
            await link.call(ME, "facility.stops", {"stall": True}, timeout_s=0.2)
        assert info.value.retryable and "cannot be reached" in info.value.message
        # the cut-short connection is not reused: a late answer cannot be read as the next one's
        result, _ = await link.call(ME, "facility.decide", {"n": 2})
        assert result["body"] == {"n": 2} and service.connections == 2
        stall.set()
        await link.aclose()


async def test_a_connection_the_service_closed_is_replaced_and_errors_come_back_typed() -> None:
    async def answers(op: str, claims: dict[str, Any], rid: str, body: dict[str, Any]) -> Any:
        if op == "refuse":
            err = {"code": "permission_denied", "message": "not yours", "hint": "h"}
            return 403, json.dumps({"ok": False, "error": err}).encode(), False
        if op == "garbage":
            return 502, b"<html>bad gateway</html>", False
        status, out, _ = await envelope(op, claims, rid, body)
        return status, out, op == "close"

    async with serving(answers) as (service, path):
        link = FacilityLink(path, 5.0)
        await link.call(ME, "close", {})  # the service closes after answering
        await link.call(ME, "facility.decide", {})  # on a new connection
        assert service.connections == 2
        with pytest.raises(PermissionDenied, match="not yours"):
            await link.call(ME, "refuse", {})
        with pytest.raises(FacilityUnavailable, match="HTTP 502, not JSON"):
            await link.call(ME, "garbage", {})
        await link.aclose()
    with pytest.raises(FacilityUnavailable):  # nobody listens any more
        await FacilityLink(path, 1.0).call(ME, "facility.decide", {})
