"""A TCP listener whose callers prove their uid with MUNGE credentials.

A user daemon on login node B reaches the facility service on node A over
TCP; SO_PEERCRED means nothing across hosts, so every request carries a MUNGE
credential (made by ``munge`` as the calling user, decoded here by ``unmunge``:
MUNGE is on every Slurm node, with the cluster's shared key). The uid is
whatever munged says encoded it, never a field of the request.

Wire (versioned JSON lines, each at most ``max_line`` bytes)::

    server -> {"v": 1, "challenge": "<hex>"}                 once per connection
    client -> {"v": 1, "cred": "<MUNGE:...>", "body": {...}} per request
    server -> {"v": 1, "ok": true, "result": {...}}
            | {"v": 1, "ok": false, "error": {"code", "message", "hint", ...}}

The credential's payload binds it to this connection and this request::

    {"v": 1, "aud": <service name>, "challenge": <hex>, "n": <request number>,
     "body": <sha256 of the canonical JSON body>}

so a credential replayed on another connection (other challenge), out of order
(other ``n``) or with another body is refused; munged itself refuses a
credential decoded twice and one past its TTL. Any failure to verify closes the
connection (fail closed); an unreachable munged answers a retryable
Unavailable, never an anonymous request.

This module sends no TLS: MUNGE authenticates, it does not hide the bodies.
Run it on the cluster's private network, or put it behind a TLS tunnel.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import pwd
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tenantry.core import errors, proc

__all__ = [
    "PROTOCOL_VERSION",
    "MungeAuthClient",
    "MungeAuthServer",
    "MungeCodec",
    "MungeIdentity",
    "canonical",
]

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
# MUNGE error numbers that mean "munged cannot answer" (retryable), not "bad credential".
_UNAVAILABLE = {1: "internal error", 5: "out of memory", 6: "socket", 7: "timeout"}
_DENIED = {
    8: "bad credential", 9: "bad version", 10: "bad cipher", 11: "bad MAC", 12: "bad zip",
    13: "bad realm", 14: "invalid credential", 15: "expired credential",
    16: "rewound credential", 17: "replayed credential", 18: "unauthorized",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class MungeIdentity:
    """Who encoded a credential, as munged decoded it."""

    uid: int
    gid: int
    user: str
    host: str  # the encoding host, as munged reports it
    encoded_at: float


def canonical(obj: Any) -> bytes:
    """The one byte encoding of a JSON value that hashes the same on both ends."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _digest(body: Any) -> str:
    return hashlib.sha256(canonical(body)).hexdigest()


@dataclass(slots=True)
class MungeCodec:
    """``munge``/``unmunge`` as argv lists (``munge_argv`` may be ``runuser -u X -- munge``)."""

    munge_argv: Sequence[str] = ("munge",)
    unmunge_argv: Sequence[str] = ("unmunge",)
    socket: str = ""  # munged's socket; empty: the default
    ttl_s: int = 60
    restrict_uid: int | None = None  # only this uid (the service's) may decode
    timeout_s: float = 10.0

    def _sock(self) -> list[str]:
        return [f"--socket={self.socket}"] if self.socket else []

    async def _run(self, argv: Sequence[str], data: bytes) -> tuple[int, bytes, str]:
        try:
            rc, out, err = await proc.run(argv[0], argv[1:], timeout_s=self.timeout_s, stdin=data)
        except TimeoutError as exc:  # an OSError too: first
            raise errors.Unavailable(
                f"{argv[0]} got no answer from munged within {self.timeout_s:g} s",
                hint="is munged running on this host? (systemctl status munge)",
            ) from exc
        except OSError as exc:
            raise errors.Unavailable(
                f"{argv[0]} cannot run: {exc}",
                hint="install MUNGE (the munge package) on this host",
            ) from exc
        return rc, out, err.decode(errors="replace").strip()

    async def encode(self, payload: bytes) -> str:
        """A credential for ``payload`` as whoever ``munge_argv`` runs as."""
        argv = [*self.munge_argv, *self._sock(), f"--ttl={self.ttl_s}"]
        if self.restrict_uid is not None:
            argv.append(f"--restrict-uid={self.restrict_uid}")
        rc, out, err = await self._run(argv, payload)
        if rc != 0:
            raise errors.Unavailable(
                f"munge could not make a credential: {err or f'exit {rc}'}",
                hint="is munged running on this host? (systemctl status munge)",
            )
        return out.decode().strip()

    async def decode(self, cred: str) -> tuple[MungeIdentity, bytes]:
        """Verify ``cred`` with munged; raises PermissionDenied or Unavailable."""
        argv = [*self.unmunge_argv, *self._sock(), "--numeric"]
        rc, out, err = await self._run(argv, cred.encode())
        if rc in _UNAVAILABLE:
            raise errors.Unavailable(
                f"munged cannot verify credentials ({_UNAVAILABLE[rc]}): {err}",
                hint="the facility service's munged is down; retry when it is back",
            )
        if rc != 0:
            why = _DENIED.get(rc, f"MUNGE error {rc}")
            raise errors.PermissionDenied(
                f"MUNGE credential refused: {why}",
                hint="make a fresh credential for this request (munge), with the cluster's key",
            )
        head, sep, payload = out.partition(b"\n\n")
        meta = dict(_meta_line(line) for line in head.decode(errors="replace").splitlines())
        if not sep or meta.get("STATUS") != "0" or not meta.get("UID", "").isdigit():
            raise errors.PermissionDenied(
                "MUNGE credential refused: unreadable unmunge answer",
                hint="check the MUNGE versions on both hosts",
            )
        uid = int(meta["UID"])
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError as exc:
            raise errors.PermissionDenied(
                f"uid {uid} has no account on the facility service's host",
                hint="the login nodes and the service must share the user database",
            ) from exc
        ident = MungeIdentity(
            uid=uid,
            gid=int(meta.get("GID", "-1") or -1),
            user=user,
            host=meta.get("ENCODE_HOST", ""),
            encoded_at=float(meta.get("ENCODE_TIME", "0") or 0),
        )
        return ident, payload


def _meta_line(line: str) -> tuple[str, str]:
    key, _, value = line.partition(":")
    return key.strip(), value.strip()


Handler = Callable[[MungeIdentity, dict[str, Any]], Awaitable[Mapping[str, Any]]]


async def _send(writer: asyncio.StreamWriter, obj: Mapping[str, Any]) -> None:
    writer.write(json.dumps({"v": PROTOCOL_VERSION, **obj}).encode() + b"\n")
    await writer.drain()


@dataclass(slots=True)
class MungeAuthServer:
    """TCP listener: verify each request's credential, then call ``handler(identity, body)``.

    ``audience`` names the service (both ends must agree); ``max_age_s`` bounds
    how old a credential may be even within munged's TTL.
    """

    handler: Handler
    codec: MungeCodec
    audience: str = "tenantry-facility"
    host: str = "127.0.0.1"
    port: int = 0
    max_line: int = 1 << 20
    max_age_s: float = 120.0
    max_connections: int = 256
    rejected: int = 0
    _server: asyncio.Server | None = None
    _conns: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self.host, self.port, limit=self.max_line
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for t in list(self._conns):
            t.cancel()
        for t in list(self._conns):
            with contextlib.suppress(BaseException):
                await t
        if self._server is not None:
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            if len(self._conns) > self.max_connections:
                await _send(writer, {"ok": False, "error": errors.Unavailable(
                    "the facility service has too many TCP connections",
                    hint="retry in a moment").to_dict()})  # fmt: skip
                return
            await self._session(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            self._conns.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        challenge = secrets.token_hex(32)
        await _send(writer, {"challenge": challenge})
        n = 0
        while True:
            try:
                line = await reader.readline()
            except ValueError:  # longer than max_line
                too_long = errors.UsageError(
                    f"request longer than {self.max_line} bytes", hint="send smaller requests"
                )
                await self._refuse(writer, too_long)
                return
            if not line:
                return
            try:
                ident, body = await self._verify(line, challenge, n)
            except errors.TenantryError as exc:
                await self._refuse(writer, exc)
                return
            n += 1
            try:
                result = dict(await self.handler(ident, body))
            except errors.TenantryError as exc:
                await _send(writer, {"ok": False, "error": exc.to_dict()})
                continue
            await _send(writer, {"ok": True, "result": result})

    async def _refuse(self, writer: asyncio.StreamWriter, exc: errors.TenantryError) -> None:
        self.rejected += 1
        log.warning("munge-auth: refused a request: %s", exc.message)
        await _send(writer, {"ok": False, "error": exc.to_dict()})

    async def _verify(
        self, line: bytes, challenge: str, n: int
    ) -> tuple[MungeIdentity, dict[str, Any]]:
        try:
            frame = json.loads(line)
        except ValueError:
            frame = None
        if not isinstance(frame, dict) or frame.get("v") != PROTOCOL_VERSION:
            raise errors.UsageError(
                "not a version-1 request frame", hint="update the user daemon to this version"
            )
        cred, body = frame.get("cred"), frame.get("body")
        if not isinstance(cred, str) or not isinstance(body, dict):
            raise errors.PermissionDenied(
                "request without a MUNGE credential", hint="every request needs a credential"
            )
        ident, payload = await self.codec.decode(cred)
        try:
            claims = json.loads(payload)
        except ValueError:
            claims = None
        expected = {
            "v": PROTOCOL_VERSION,
            "aud": self.audience,
            "challenge": challenge,
            "n": n,
            "body": _digest(body),
        }
        if claims != expected:
            raise errors.PermissionDenied(
                "MUNGE credential is not bound to this request "
                "(other service, connection, order or body)",
                hint="make one credential per request, for this connection's challenge",
            )
        if abs(time.time() - ident.encoded_at) > self.max_age_s:
            raise errors.PermissionDenied(
                "MUNGE credential is too old", hint="check the clocks of the login nodes (NTP)"
            )
        return ident, body


@dataclass(slots=True)
class MungeAuthClient:
    """One TCP connection to a :class:`MungeAuthServer`; one credential per request."""

    host: str
    port: int
    codec: MungeCodec
    audience: str = "tenantry-facility"
    timeout_s: float = 30.0
    max_line: int = 1 << 20
    _reader: asyncio.StreamReader | None = None
    _writer: asyncio.StreamWriter | None = None
    _challenge: str = ""
    _n: int = 0

    async def connect(self) -> None:
        try:
            async with asyncio.timeout(self.timeout_s):
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, limit=self.max_line
                )
            hello = await self._read()
        except (OSError, TimeoutError) as exc:
            raise errors.Unavailable(
                f"cannot reach the facility service at {self.host}:{self.port}: {exc}",
                hint="check facility_address and that the service runs; this is retryable",
            ) from exc
        challenge = hello.get("challenge")
        if not isinstance(challenge, str):
            raise errors.Unavailable(
                "the facility service did not send a challenge",
                hint=str(hello.get("error", {}).get("message", "")) or "retry",
            )
        self._challenge, self._n = challenge, 0

    async def _read(self) -> dict[str, Any]:
        assert self._reader is not None
        async with asyncio.timeout(self.timeout_s):
            line = await self._reader.readline()
        if not line:
            raise ConnectionError("connection closed by the facility service")
        data = json.loads(line)
        if not isinstance(data, dict) or data.get("v") != PROTOCOL_VERSION:
            raise errors.Unavailable("the facility service speaks another protocol version")
        return data

    def claims(self, body: Mapping[str, Any]) -> bytes:
        """The payload the next request's credential must carry."""
        return canonical(
            {
                "v": PROTOCOL_VERSION,
                "aud": self.audience,
                "challenge": self._challenge,
                "n": self._n,
                "body": _digest(body),
            }
        )

    async def send_raw(self, cred: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Send one frame with a given credential (the tests forge with this)."""
        assert self._writer is not None
        frame = {"v": PROTOCOL_VERSION, "cred": cred, "body": dict(body)}
        try:
            self._writer.write(json.dumps(frame).encode() + b"\n")
            await self._writer.drain()
            return await self._read()
        except (OSError, TimeoutError, ValueError) as exc:
            raise errors.Unavailable(
                f"the connection to the facility service broke: {exc}",
                hint="reconnect; this is retryable",
            ) from exc

    async def exchange(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """One authenticated request; the service's answer frame as it came (ok or not).

        Raises ``Unavailable`` when the service or munged cannot be reached."""
        if self._writer is None:
            await self.connect()
        cred = await self.codec.encode(self.claims(body))
        answer = await self.send_raw(cred, body)
        self._n += 1
        return answer

    async def request(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """One authenticated request; raises the service's error as a TenantryError."""
        answer = await self.exchange(body)
        if answer.get("ok"):
            result = answer.get("result")
            return result if isinstance(result, dict) else {}
        raise errors.from_dict(answer.get("error") or {})

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
            self._writer = None
