"""Connection limits of the daemon's socket server.

uvicorn already bounds concurrency (``limit_concurrency``: connections past it
get 503) and idle keep-alive connections (``timeout_keep_alive``). What it
lacks is a header timeout: a client that connects and never sends a complete
request would hold its connection (and a slot) forever. ``protocol_with``
adds one to the peer-credential protocol.
"""

from __future__ import annotations

import asyncio

from tenantry.gateway.peercred import PeerCredProtocol


class _HeaderTimeout(PeerCredProtocol):
    header_timeout_s = 10.0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._header_timer: asyncio.TimerHandle | None = self.loop.call_later(
            self.header_timeout_s, self._no_request
        )

    def _no_request(self) -> None:
        self._header_timer = None
        if self.cycle is None and not self.transport.is_closing():
            self.transport.close()  # no complete request head in time

    def connection_lost(self, exc: Exception | None) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().connection_lost(exc)


def protocol_with(header_timeout_s: float, tcp_peers: bool = False) -> type[PeerCredProtocol]:
    """The socket protocol class closing connections without a request head in time
    (``tcp_peers``: knowing loopback TCP callers by uid, for the hook listener only)."""
    attrs = {"header_timeout_s": header_timeout_s, "tcp_peers": tcp_peers}
    return type("HeaderTimeoutProtocol", (_HeaderTimeout,), attrs)
