"""The uid behind a loopback TCP connection, from the kernel's socket table.

A TCP socket carries no ``SO_PEERCRED``, but the kernel records the uid that
created every socket, and for a connection between two ends on this machine
both ends are in ``/proc/net/tcp`` (``tcp6`` for IPv6). The peer's end is the
row whose local address is the connection's remote address and whose remote
address is ours; its ``uid`` column is the caller's uid. As with
``SO_PEERCRED`` this is the kernel's word, never the client's.

``peer_uid`` answers None when no such row exists (the peer is gone, or not on
this machine): callers refuse the connection then.
"""

from __future__ import annotations

import socket
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from asyncio.trsock import TransportSocket

TABLES: dict[int, str] = {socket.AF_INET: "/proc/net/tcp", socket.AF_INET6: "/proc/net/tcp6"}


def hex_address(family: int, host: str, port: int) -> str:
    """An address as the kernel prints it in ``/proc/net/tcp``: ``0100007F:1F90``."""
    raw = socket.inet_pton(family, host)
    # the kernel prints each 32-bit word of the address in the host's byte order
    words = [raw[i : i + 4] for i in range(0, len(raw), 4)]
    text = "".join(f"{int.from_bytes(w, sys.byteorder):08X}" for w in words)
    return f"{text}:{port:04X}"


def uid_in_table(table: str, peer: str, ours: str) -> int | None:
    """The uid of the row ``peer -> ours`` in the text of ``/proc/net/tcp[6]``."""
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 7 and fields[1] == peer and fields[2] == ours:
            try:
                return int(fields[7])
            except ValueError:
                return None
    return None


def peer_uid(sock: socket.socket | TransportSocket) -> int | None:
    """The uid of the process at the other end of a loopback TCP connection, or None."""
    family = int(sock.family)
    path = TABLES.get(family)
    if path is None:
        return None
    try:
        ours_addr = sock.getsockname()
        peer_addr = sock.getpeername()
        ours = hex_address(family, ours_addr[0], ours_addr[1])
        peer = hex_address(family, peer_addr[0], peer_addr[1])
        with open(path, encoding="ascii") as f:
            return uid_in_table(f.read(), peer, ours)
    except (OSError, ValueError):
        return None
