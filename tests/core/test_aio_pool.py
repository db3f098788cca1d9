"""The asyncio client keeps at most ``CONNECTIONS`` connections, reused for every request.

A burst of calls far beyond it (as the MCP shim or a benchmark sends) must not
make the daemon accept a connection per call: a small Unix-socket server that
speaks the daemon's wire (a JSON body of known length, kept alive) counts the
connections it accepts and the requests in flight on them.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tenantry.client import aio
from tenantry.core.settings import Settings


class CountingServer:
    def __init__(self) -> None:
        self.accepted = 0
        self.requests = 0
        self.in_flight = 0
        self.most_in_flight = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                await reader.readexactly(length)
                self.requests += 1
                self.in_flight += 1
                self.most_in_flight = max(self.most_in_flight, self.in_flight)
                await asyncio.sleep(0.002)  # the daemon at work
                self.in_flight -= 1
                body = json.dumps({"ok": True, "result": self.requests}).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode()
                    + body
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionResetError):
            pass
        finally:
            writer.close()


async def test_a_burst_reuses_a_bounded_set_of_connections(tmp_path: Path) -> None:
    sock = str(tmp_path / "d.sock")
    counting = CountingServer()
    server = await asyncio.start_unix_server(counting.serve, sock)
    client = aio.AsyncClient(Settings(socket=sock), claims={"agent": "human"})
    try:
        burst = 20 * aio.CONNECTIONS
        results = await asyncio.gather(*(client.call("health", {}) for _ in range(burst)))
        assert len(results) == burst and all(r[0] for r in results)
        assert counting.requests == burst
        assert counting.accepted <= aio.CONNECTIONS
        assert counting.most_in_flight <= aio.CONNECTIONS
        again = await asyncio.gather(*(client.call("health", {}) for _ in range(burst)))
        assert len(again) == burst and counting.accepted <= aio.CONNECTIONS  # all kept
    finally:
        await client.aclose()
        server.close()
        await server.wait_closed()
