"""The audit anchor sent to the system log, without a process or a wait per batch.

``AnchorLog`` is a ``ChainWriter.on_anchor``: after each durable batch it sends
one RFC 3164 datagram (``<13>... tenantry-audit[pid]: tenantry audit anchor
seq=N hash=H mac=M``) to the local syslog socket, which journald or rsyslog
keep out of the user's reach. The socket is non-blocking: when the log daemon
lags or is absent the anchor is dropped and counted, never waited for -- the
next batch's anchor names a later head, which covers every earlier record.
"""

from __future__ import annotations

import logging
import os
import socket
import time

log = logging.getLogger(__name__)

DEV_LOG = "/dev/log"
TAG = "tenantry-audit"
# facility user (1), severity notice (5)
PRI = 1 * 8 + 5


def anchor_message(seq: int, last: str, mac: str) -> str:
    """The text ``tenantry audit verify --anchor`` takes its ``SEQ:HASH`` from."""
    return f"tenantry audit anchor seq={seq} hash={last}" + (f" mac={mac}" if mac else "")


class AnchorLog:
    """Sends each anchor as one datagram to ``path``; drops it rather than wait."""

    def __init__(self, path: str = DEV_LOG) -> None:
        self.path = path
        self.sent = 0
        self.dropped = 0
        self._sock: socket.socket | None = None
        self._warned = False

    def __call__(self, seq: int, last: str, mac: str) -> None:
        stamp = time.strftime("%b %d %H:%M:%S", time.localtime())
        line = f"<{PRI}>{stamp} {TAG}[{os.getpid()}]: {anchor_message(seq, last, mac)}"
        try:
            self._socket().send(line.encode())
        except OSError as exc:  # full (EAGAIN), absent (ENOENT) or refused: drop, do not wait
            self._drop(exc)
            return
        self.sent += 1
        self._warned = False

    def _socket(self) -> socket.socket:
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setblocking(False)
            try:
                sock.connect(self.path)
            except OSError:
                sock.close()
                raise
            self._sock = sock
        return self._sock

    def _drop(self, exc: OSError) -> None:
        self.dropped += 1
        if self._sock is not None and not isinstance(exc, BlockingIOError):
            self._sock.close()  # the log daemon restarted or went away: connect again next time
            self._sock = None
        if not self._warned:
            self._warned = True
            log.warning(
                "the audit anchor could not be sent to %s (%s); it is dropped until it can"
                " (the next anchor covers it)",
                self.path,
                exc.strerror or exc,
            )

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
