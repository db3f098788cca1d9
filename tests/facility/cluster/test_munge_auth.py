"""TCP + MUNGE: a credential made as user X authenticates as X; replays and forgeries fail.

Real munged (scripts/dev-slurm starts it), real Unix users (tt-i16c-*), real TCP.
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from tests.facility.cluster.helpers import User, require

from tenantry.core import errors
from tenantry.facility.munge_auth import (
    MungeAuthClient,
    MungeAuthServer,
    MungeCodec,
    MungeIdentity,
)


def _munged_up() -> bool:
    if shutil.which("munge") is None or shutil.which("unmunge") is None:
        return False
    return subprocess.run(["munge", "-n"], capture_output=True, timeout=10).returncode == 0


@pytest.fixture(scope="module")
def munged() -> None:
    require("munged", _munged_up(), "start it with scripts/dev-slurm start (it starts munge)",
            "TENANTRY_REQUIRE_SLURM")  # fmt: skip


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[MungeIdentity, dict[str, Any]]] = []

    async def __call__(self, ident: MungeIdentity, body: dict[str, Any]) -> Mapping[str, Any]:
        self.calls.append((ident, body))
        return {"uid": ident.uid, "user": ident.user, "echo": body}


@pytest.fixture
async def server(munged: None) -> AsyncIterator[tuple[MungeAuthServer, Recorder]]:
    rec = Recorder()
    srv = MungeAuthServer(rec, MungeCodec())
    await srv.start()
    yield srv, rec
    await srv.aclose()


def as_user(user: User, **kw: Any) -> MungeCodec:
    return MungeCodec(munge_argv=["runuser", "-u", user.name, "--", "munge"], **kw)


def client(srv: MungeAuthServer, codec: MungeCodec) -> MungeAuthClient:
    return MungeAuthClient("127.0.0.1", srv.port, codec)


async def connected(srv: MungeAuthServer, user: User, **kw: Any) -> MungeAuthClient:
    """A client connected to ``srv`` whose credentials are made as ``user``."""
    c = client(srv, as_user(user, **kw))
    await c.connect()
    return c


async def refused(c: MungeAuthClient, cred: str, body: dict[str, Any]) -> dict[str, Any]:
    """The error the service answers to ``cred`` with ``body`` on ``c`` (closed after)."""
    answer = await c.send_raw(cred, body)
    await c.aclose()
    assert not answer["ok"], answer
    error: dict[str, Any] = answer["error"]
    return error


async def test_credential_made_as_a_user_authenticates_as_that_user(
    server: tuple[MungeAuthServer, Recorder], unix_users: list[User]
) -> None:
    srv, rec = server
    for user in unix_users:
        c = client(srv, as_user(user, restrict_uid=0))
        try:
            # a uid claimed in the body changes nothing
            got = await c.request({"op": "whoami", "uid": 0, "user": "root"})
            again = await c.request({"op": "second"})
        finally:
            await c.aclose()
        assert (got["uid"], got["user"]) == (user.uid, user.name)
        assert again["uid"] == user.uid
    assert [i.user for i, _ in rec.calls] == [u.name for u in unix_users for _ in (1, 2)]


async def test_replayed_credential_is_refused(
    server: tuple[MungeAuthServer, Recorder], unix_users: list[User]
) -> None:
    srv, rec = server
    alice = unix_users[0]
    body = {"op": "cancel", "job": "1"}
    first = await connected(srv, alice)
    cred = await first.codec.encode(first.claims(body))
    assert (await first.send_raw(cred, body))["ok"]
    # the same credential again on the same connection (munged and the counter refuse)
    assert (await refused(first, cred, body))["code"] == "permission_denied"
    # and on a fresh connection (another challenge)
    other = await connected(srv, alice)
    assert (await refused(other, cred, body))["code"] == "permission_denied"
    assert len(rec.calls) == 1


async def test_credential_for_one_connection_is_refused_on_another(
    server: tuple[MungeAuthServer, Recorder], unix_users: list[User]
) -> None:
    srv, rec = server
    a = await connected(srv, unix_users[0])
    b = await connected(srv, unix_users[0])
    body = {"op": "x"}
    cred = await a.codec.encode(a.claims(body))  # never sent on a: fresh for munged
    assert "not bound" in (await refused(b, cred, body))["message"]
    await a.aclose()
    assert rec.calls == []


async def test_tampered_credential_and_tampered_body_are_refused(
    server: tuple[MungeAuthServer, Recorder], unix_users: list[User]
) -> None:
    srv, rec = server
    alice = unix_users[0]
    c = await connected(srv, alice)
    body = {"op": "status", "job": "1"}
    cred = await c.codec.encode(c.claims(body))
    mid = len(cred) // 2
    forged = cred[:mid] + ("A" if cred[mid] != "A" else "B") + cred[mid + 1 :]
    assert "MUNGE credential refused" in (await refused(c, forged, body))["message"]
    c = await connected(srv, alice)
    cred = await c.codec.encode(c.claims(body))
    another_body = {"op": "cancel", "job": "1"}
    assert "not bound" in (await refused(c, cred, another_body))["message"]
    assert rec.calls == []


async def test_expired_credential_is_refused(
    server: tuple[MungeAuthServer, Recorder], unix_users: list[User]
) -> None:
    srv, rec = server
    c = await connected(srv, unix_users[0], ttl_s=1)
    body = {"op": "x"}
    cred = await c.codec.encode(c.claims(body))
    made = time.time()
    while time.time() < made + 2.5:  # the condition is the clock: past the TTL plus skew
        await asyncio.sleep(0.1)
    assert "expired" in (await refused(c, cred, body))["message"]
    assert rec.calls == []


async def test_service_fails_closed_when_munged_is_unreachable(
    munged: None, unix_users: list[User], tmp_path: Any
) -> None:
    rec = Recorder()
    srv = MungeAuthServer(rec, MungeCodec(socket=str(tmp_path / "no-munged.socket")))
    await srv.start()
    try:
        c = client(srv, as_user(unix_users[0]))
        with pytest.raises(errors.Unavailable) as exc:
            await c.request({"op": "x"})
        await c.aclose()
    finally:
        await srv.aclose()
    assert exc.value.retryable and "munged" in exc.value.message
    assert rec.calls == []


async def test_client_fails_closed_when_its_munged_is_unreachable(
    server: tuple[MungeAuthServer, Recorder], tmp_path: Any
) -> None:
    srv, rec = server
    c = client(srv, MungeCodec(socket=str(tmp_path / "none.socket")))
    with pytest.raises(errors.Unavailable):
        await c.request({"op": "x"})
    await c.aclose()
    assert rec.calls == []


async def test_frame_without_credential_is_refused(
    server: tuple[MungeAuthServer, Recorder],
) -> None:
    srv, rec = server
    reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
    hello = await reader.readline()
    assert b"challenge" in hello
    writer.write(b'{"v": 1, "body": {"op": "x"}}\n')
    await writer.drain()
    answer = await reader.readline()
    assert b"permission_denied" in answer
    assert await reader.readline() == b""  # connection closed
    writer.close()
    assert rec.calls == []
