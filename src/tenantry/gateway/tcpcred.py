"""The uid behind a loopback TCP connection, from the kernel's socket table.

A TCP socket carries no ``SO_PEERCRED``, but the kernel records the uid that
created every socket, and for a connection between two ends on this machine
both ends are in ``/proc/net/tcp`` (``tcp6`` for IPv6). The peer's end is the
row whose local address is the connection's remote address and whose remote
address is ours; its ``uid`` column is the caller's uid. As with
``SO_PEERCRED`` this is the kernel's word, never the client's.

The table is asked for that one socket over netlink (``sock_diag``, an exact
lookup by address and port: tens of microseconds); reading the text table
costs milliseconds on a busy host (the kernel prints every socket), so it is
only the fallback where netlink is unavailable.

``peer_uid`` answers None when no such socket exists (the peer is gone, or not
on this machine): callers refuse the connection then.
"""

from __future__ import annotations

import socket
import struct
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


NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST = 1
NLMSG_ERROR = 2
_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid
# inet_diag_req_v2: family, protocol, ext, pad, states; inet_diag_sockid: sport, dport (big
# endian), src[16], dst[16], interface, cookie[2]
_REQ = struct.Struct("=BBBBI")
_SOCKID = struct.Struct(">HH16s16s")
_TAIL = struct.Struct("=III")
_UID_AT = 4 + 48 + 12  # in inet_diag_msg: family..retrans, the sockid, expires/rqueue/wqueue


def _packed(family: int, host: str) -> bytes:
    return socket.inet_pton(family, host).ljust(16, b"\0")


def diag_uid(family: int, peer: tuple[str, int], ours: tuple[str, int]) -> int | None:
    """The uid of the TCP socket ``peer -> ours`` from the kernel, over netlink."""
    sockid = _SOCKID.pack(peer[1], ours[1], _packed(family, peer[0]), _packed(family, ours[0]))
    body = _REQ.pack(family, socket.IPPROTO_TCP, 0, 0, 0xFFFFFFFF) + sockid
    body += _TAIL.pack(0, 0xFFFFFFFF, 0xFFFFFFFF)  # any interface, no cookie
    msg = _NLMSG.pack(_NLMSG.size + len(body), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, 1, 0) + body
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
        nl.settimeout(1.0)
        nl.sendto(msg, (0, 0))
        data = nl.recv(65536)
    length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data)
    if kind == NLMSG_ERROR or length < _NLMSG.size + _UID_AT + 4:
        return None
    (uid,) = struct.unpack_from("=I", data, _NLMSG.size + _UID_AT)
    return int(uid)


def peer_uid(sock: socket.socket | TransportSocket) -> int | None:
    """The uid of the process at the other end of a loopback TCP connection, or None."""
    family = int(sock.family)
    path = TABLES.get(family)
    if path is None:
        return None
    try:
        ours_addr = sock.getsockname()
        peer_addr = sock.getpeername()
    except OSError:
        return None
    try:
        return diag_uid(family, peer_addr[:2], ours_addr[:2])
    except OSError:
        pass  # no netlink here (a container without it): the text table
    try:
        ours = hex_address(family, ours_addr[0], ours_addr[1])
        peer = hex_address(family, peer_addr[0], peer_addr[1])
        with open(path, encoding="ascii") as f:
            return uid_in_table(f.read(), peer, ours)
    except (OSError, ValueError):
        return None
