"""Caller identity from the Unix socket (SO_PEERCRED), never from the request.

uvicorn's HTTP protocol (httptools' C parser; h11 when it is missing) is
subclassed so that each connection reads the peer's pid/uid/gid once and every
request on it carries them in the ASGI scope as ``scope["tenantry.peer"]``.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from tenantry.gateway.tcpcred import peer_uid

try:  # a C parser: a quarter of the per-request cost of the pure-Python h11
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Http
except ImportError:  # pragma: no cover - httptools is a dependency
    _Http = H11Protocol  # type: ignore[assignment,misc]

PEER_KEY = "tenantry.peer"
# the path of the listening socket the connection arrived on: the daemon's own
# socket, or one sandboxed session's socket (which *is* that session's identity)
SOCKET_KEY = "tenantry.socket"
_UCRED = struct.Struct("3i")


def peer_credentials(sock: socket.socket, tcp: bool = False) -> tuple[int, int, int] | None:
    """(pid, uid, gid) of the other end of a Unix socket, or None when unknown.

    With ``tcp`` (only the hook listener, ``gateway.hookserve``), on a loopback
    TCP connection the uid is the kernel's record of the peer's socket
    (``gateway.tcpcred``); the pid and gid are unknown there (0 and -1).
    """
    if tcp and sock.family in (socket.AF_INET, socket.AF_INET6):
        uid = peer_uid(sock)
        return None if uid is None else (0, uid, -1)
    if sock.family != socket.AF_UNIX:
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    pid, uid, gid = _UCRED.unpack(raw)
    return pid, uid, gid


class PeerCredProtocol(_Http):
    tcp_peers = False  # read the uid of loopback TCP peers too (the hook listener's class)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        cred = peer_credentials(sock, self.tcp_peers) if sock is not None else None
        where = ""
        if sock is not None and sock.family == socket.AF_UNIX:
            name = sock.getsockname()
            where = name if isinstance(name, str) else ""
        inner = self.app

        async def app(scope: Any, receive: Any, send: Any) -> None:
            scope = dict(scope)
            scope[PEER_KEY] = cred
            scope[SOCKET_KEY] = where
            await inner(scope, receive, send)

        self.app = app
