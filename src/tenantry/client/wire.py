"""The daemon's wire: HTTP/1.1 + JSON on a Unix socket, one codec for every client.

The CLI, the MCP shim and the hooks all talk to the daemon through this
module (standard library only, no ``http.client``: importing it and the
e-mail parser under it costs a cold CLI tens of milliseconds). It has three
parts:

- ``encode_request``: the bytes of one ``POST /v1/op/<op>`` (or a ``GET``).
- ``Parser``: a sans-I/O response parser. ``feed(data)`` returns events --
  ``Head(status, headers)``, body bytes, ``END`` -- for a ``Content-Length``
  or chunked body, so one connection carries request after request.
- ``Connection`` (blocking) and ``AsyncConnection`` (asyncio): a kept-alive
  socket that sends a request and yields the response's events.

Streaming ops answer newline-delimited JSON; ``Lines`` splits body bytes into
lines. ``env_digest`` names an environment the daemon already holds.
"""

from __future__ import annotations

import _socket  # the C socket type: ``socket`` (its enums, selectors) costs a cold start ~1.5 ms

TYPE_CHECKING = False  # the client path avoids importing typing
if TYPE_CHECKING:
    import asyncio
    from collections.abc import AsyncGenerator, Iterator, Mapping
    from typing import Any, Protocol

    class HasFileno(Protocol):
        def fileno(self) -> int: ...


API = "/v1"
PRINCIPAL_HEADER = "X-Tenantry-Principal"
REQUEST_ID_HEADER = "X-Tenantry-Request-Id"
ENV_DIGEST = "env_digest"
# env_digest: whichever environment this principal sent last (the daemon's hook submits with it)
ENV_LATEST = "latest"
MAX_HEAD = 65536
_RECV = 262144


class WireError(Exception):
    """The connection broke or the daemon sent something that is not HTTP."""


def env_digest(env: Mapping[str, object]) -> str:
    """The digest a request sends instead of an environment the daemon already holds."""
    import hashlib  # only clients that forward an environment pay for it
    import json  # sort_keys and compact separators: the daemon hashes the same text

    raw = json.dumps(dict(env), sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(raw.encode()).hexdigest()


def held_env(
    params: dict[str, Any], held: Mapping[str, object] | None, digest: str = ""
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``params`` with an environment equal to ``held`` replaced by its digest
    (``digest``: ``held``'s, when the caller knows it already).

    Returns the params to send and the environment they carry in full (to hold once
    the daemon has accepted it), or None.
    """
    env = params.get("env")
    if not isinstance(env, dict):
        return params, None
    if env != held:  # a first send costs no digest (nor a hashlib import)
        return params, env
    out = {k: v for k, v in params.items() if k != "env"}
    out[ENV_DIGEST] = digest or env_digest(env)
    return out, None


def encode_request(
    method: str, path: str, body: bytes = b"", headers: Mapping[str, str] | None = None
) -> bytes:
    """One request; header values must be ASCII without CR/LF (JSON with ensure_ascii is)."""
    lines = [f"{method} {path} HTTP/1.1", "Host: tenantry"]
    for key, value in (headers or {}).items():
        if "\r" in value or "\n" in value:
            raise ValueError(f"header {key} holds a line break")
        lines.append(f"{key}: {value}")
    if body or method == "POST":
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Head:
    __slots__ = ("headers", "status")

    def __init__(self, status: int, headers: dict[str, str]) -> None:
        self.status = status
        self.headers = headers

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "")

    @property
    def keep_alive(self) -> bool:
        return self.headers.get("connection", "").lower() != "close"


END = None  # the event that ends a response


class Parser:
    """Turns the bytes of responses into ``Head``, body ``bytes`` and ``END`` events."""

    def __init__(self) -> None:
        self._buf = b""
        self._state = "head"
        self._left = 0  # bytes left of the body or of the current chunk
        self.head: Head | None = None
        self.done = False  # ``until_end`` has seen the response's END

    def until_end(self, chunk: bytes) -> Iterator[Head | bytes]:
        """The events of one response in ``chunk`` up to its END, which sets ``done``.

        An empty ``chunk`` (the daemon closed the socket) before the END is an error.
        """
        if not chunk:
            raise WireError("the daemon closed the connection mid-response")
        for event in self.feed(chunk):
            if event is END:
                self.done = True
                return
            yield event

    @property
    def reusable(self) -> bool:
        """The response was read to its END and the daemon keeps the connection open."""
        return self.done and self.head is not None and self.head.keep_alive

    def feed(self, data: bytes) -> list[Head | bytes | None]:
        self._buf += data
        out: list[Head | bytes | None] = []
        while True:
            state = self._state
            if state == "head":
                end = self._buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(self._buf) > MAX_HEAD:
                        raise WireError("response head too long")
                    return out
                self.head = _head(self._buf[:end])
                self._buf = self._buf[end + 4 :]
                out.append(self.head)
                if self.head.headers.get("transfer-encoding", "").lower() == "chunked":
                    self._state = "size"
                else:
                    self._left = int(self.head.headers.get("content-length", "0") or 0)
                    self._state = "body"
            elif state == "body":
                take = self._buf[: self._left]
                self._buf = self._buf[len(take) :]
                self._left -= len(take)
                if take:
                    out.append(take)
                if self._left:
                    return out
                out.append(END)
                self._state = "head"
            elif state == "size":
                end = self._buf.find(b"\r\n")
                if end < 0:
                    return out
                try:
                    self._left = int(self._buf[:end].split(b";")[0], 16)
                except ValueError as exc:
                    raise WireError("bad chunk size in the response") from exc
                self._buf = self._buf[end + 2 :]
                self._state = "chunk" if self._left else "trailer"
            elif state == "chunk":
                if len(self._buf) < self._left + 2:
                    if len(self._buf) > self._left:
                        return out
                    take, self._buf = self._buf, b""
                    self._left -= len(take)
                    if take:
                        out.append(take)
                    return out
                out.append(self._buf[: self._left])
                self._buf = self._buf[self._left + 2 :]
                self._state = "size"
            else:  # trailer: header lines until an empty one
                end = self._buf.find(b"\r\n")
                if end < 0:
                    return out
                line, self._buf = self._buf[:end], self._buf[end + 2 :]
                if not line:
                    out.append(END)
                    self._state = "head"


def _head(raw: bytes) -> Head:
    lines = raw.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise WireError("the daemon did not answer HTTP")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return Head(int(parts[1]), headers)


class Lines:
    """Newline-delimited JSON from body bytes: ``feed`` returns the complete lines."""

    def __init__(self) -> None:
        self._rest = b""

    def feed(self, data: bytes) -> list[bytes]:
        self._rest += data
        if b"\n" not in self._rest:
            return []
        *lines, self._rest = self._rest.split(b"\n")
        return [line for line in lines if line.strip()]

    def close(self) -> list[bytes]:
        rest, self._rest = self._rest, b""
        return [rest] if rest.strip() else []


class Connection:
    """A blocking, kept-alive connection to the daemon's socket."""

    def __init__(self, path: str, timeout: float | None = None) -> None:
        self.path = path
        self.timeout = timeout
        self._sock: _socket.socket | None = None
        self.fresh = False  # the last request opened a new connection

    def _open(self) -> _socket.socket:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        if self.timeout is not None:
            sock.settimeout(self.timeout)
        try:
            sock.connect(self.path)
        except OSError:
            sock.close()
            raise  # FileNotFoundError / ConnectionRefusedError: the caller may start one
        return sock

    def request(self, data: bytes, timeout: float | None = None) -> Iterator[Head | bytes]:
        """Send one encoded request; yields the ``Head`` and then body chunks.

        Connecting raises ``OSError`` (no daemon); a break after that raises
        ``WireError``. A kept-alive socket the daemon closed while it was idle
        is noticed before anything is sent on it, so no request is sent twice.
        """
        if self._sock is not None and _closed_by_peer(self._sock):
            self.close()
        self.fresh = self._sock is None
        if self._sock is None:
            self._sock = self._open()
        self._sock.settimeout(timeout if timeout is not None else self.timeout)
        try:
            self._sock.sendall(data)
        except OSError as exc:
            self.close()
            raise WireError(f"lost the connection to the daemon: {exc}") from exc
        return self._events()

    def _events(self) -> Iterator[Head | bytes]:
        parser = Parser()
        sock = self._sock
        assert sock is not None
        try:
            while not parser.done:
                try:
                    chunk = sock.recv(_RECV)
                except OSError as exc:
                    raise WireError(f"lost the connection to the daemon: {exc}") from exc
                yield from parser.until_end(chunk)
        finally:
            if not parser.reusable:
                self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


def _closed_by_peer(sock: HasFileno | None) -> bool:
    """Is an idle socket readable (the daemon closed it, or sent what nobody asked for)?"""
    import select

    if sock is None:
        return True

    poller = select.poll()
    poller.register(sock, select.POLLIN | select.POLLHUP)
    return bool(poller.poll(0))


class AsyncConnection:
    """An asyncio, kept-alive connection to the daemon's socket (one request at a time)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    @property
    def connected(self) -> bool:
        """Connected and not closed by this side nor seen closed (no system call)."""
        return (
            self._writer is not None
            and self._reader is not None
            and not self._writer.is_closing()
            and not self._reader.at_eof()
        )

    @property
    def open(self) -> bool:
        """Usable for the next request (not closed by either side while idle)."""
        return self.connected and not _closed_by_peer(
            self._writer.get_extra_info("socket") if self._writer is not None else None
        )

    async def connect(self) -> None:
        import asyncio

        self._reader, self._writer = await asyncio.open_unix_connection(self.path, limit=_RECV)

    async def request(self, data: bytes) -> AsyncGenerator[Head | bytes, None]:
        """Send one encoded request; yields the ``Head`` and then body chunks."""
        if not self.open:
            self.close()
            await self.connect()
        reader, writer = self._reader, self._writer
        assert reader is not None and writer is not None
        parser = Parser()
        try:
            writer.write(data)
            await writer.drain()
            while not parser.done:
                for event in parser.until_end(await reader.read(_RECV)):
                    yield event
        except OSError as exc:
            raise WireError(f"lost the connection to the daemon: {exc}") from exc
        finally:
            if not parser.reusable:
                self.close()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            self._reader = None


class Pool:
    """Kept-alive ``AsyncConnection``s to one socket: at most ``size`` kept while idle."""

    def __init__(self, path: str, size: int) -> None:
        self.path = path
        self.size = size
        self._idle: list[AsyncConnection] = []

    def checkout(self) -> AsyncConnection:
        """An idle connection still open on this side, else a new (unconnected) one."""
        while self._idle:
            conn = self._idle.pop()
            if conn.connected:  # ``request`` checks that the peer did not close it meanwhile
                return conn
            conn.close()
        return AsyncConnection(self.path)

    def checkin(self, conn: AsyncConnection) -> None:
        if conn.connected and len(self._idle) < self.size:
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
