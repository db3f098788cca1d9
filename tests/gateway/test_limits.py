"""Server limits: header timeout, body cap while reading, strict edge, request ids."""

from __future__ import annotations

import json
import os
import re
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import UsageError


def _raw(path: str, data: bytes, read: bool = True) -> bytes:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(path)
    try:
        s.sendall(data)
        if not read:
            return b""
        out = b""
        while chunk := s.recv(65536):
            out += chunk
            if b"\r\n\r\n" in out and b'"ok"' in out:
                break
        return out
    finally:
        s.close()


def test_a_silent_connection_is_closed_after_the_header_timeout(
    start_daemon: Callable[..., Any],
) -> None:
    d = start_daemon(TENANTRY_HEADER_TIMEOUT_S="0.5")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(20)
    s.connect(d.socket)
    s.sendall(b"POST /v1/op/facility.info HTTP/1.1\r\nHost: x\r\n")  # never finished
    t0 = time.monotonic()
    assert s.recv(100) == b""  # closed by the daemon
    assert time.monotonic() - t0 < 10
    s.close()
    assert d.client().call("facility.info")["version"]


def test_the_body_cap_is_enforced_while_reading(start_daemon: Callable[..., Any]) -> None:
    d = start_daemon(TENANTRY_MAX_BODY_BYTES="10000")
    head = (
        "POST /v1/op/jobs.list HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "X-Tenantry-Principal: {}\r\n"
    )
    # declared too big: refused before a byte of the body is read
    out = _raw(d.socket, (head + "Content-Length: 104857600\r\n\r\n").encode())
    assert b" 400 " in out.split(b"\r\n")[0] and b"request body over 10000" in out
    # chunked, no length: refused once the cap is passed
    chunk = b"a" * 4096
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(5)) + b"0\r\n\r\n"
    out = _raw(d.socket, (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + body)
    assert b"request body over 10000" in out


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"argv": ["echo", "a\x00b"]}, "NUL"),
        ({"argv": ["echo", "\ud800"]}, "surrogate"),
        ({"argv": ["echo", "a\x1b[2J"]}, "control character"),
        ({"argv": ["echo"], "cwd": "/tmp\n"}, "control character"),
    ],
)
def test_the_edge_refuses_hostile_text(
    start_daemon: Callable[..., Any], tmp_path: Path, params: dict[str, Any], words: str
) -> None:
    d = start_daemon()
    params.setdefault("cwd", str(tmp_path))
    with pytest.raises(UsageError, match=words):
        list(d.client(agent="claude-code", session="s").stream("commands.run", params))


def test_a_lone_surrogate_in_a_claim_never_breaks_events(
    start_daemon: Callable[..., Any],
) -> None:
    d = start_daemon()
    bad = d.client(agent="claude-code", session="x\ud800")
    with pytest.raises(UsageError, match="surrogate"):
        bad.call("jobs.list")
    assert isinstance(d.client().call("events.list", {})["events"], list)


def test_an_agent_session_sees_only_its_own_events(start_daemon: Callable[..., Any]) -> None:
    d = start_daemon()
    mine = d.client(agent="claude-code", session="s-mine")
    other = d.client(agent="claude-code", session="s-other")
    other.call("jobs.list")
    mine.call("jobs.list")
    seen = {e["principal"] for e in mine.call("events.list", {})["events"] if e["principal"]}
    assert seen and all(p.endswith("/s-mine") for p in seen), seen
    human = {e["principal"] for e in d.client().call("events.list", {})["events"]}
    assert any(p.endswith("/s-other") for p in human)


def test_a_bad_request_id_is_refused(start_daemon: Callable[..., Any]) -> None:
    d = start_daemon()
    head = (
        "POST /v1/op/jobs.list HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "X-Tenantry-Principal: {}\r\nX-Tenantry-Request-Id: a b/c\r\nContent-Length: 2\r\n\r\n{}"
    )
    out = _raw(d.socket, head.encode())
    body = json.loads(out.split(b"\r\n\r\n", 1)[1])
    assert body["error"]["code"] == "usage" and "request id" in body["error"]["message"]


async def test_health_answers_only_the_daemons_own_uid() -> None:
    """Another uid (or a connection without peer credentials) learns nothing."""
    from starlette.requests import Request

    from tenantry.gateway.app import health
    from tenantry.gateway.peercred import PEER_KEY

    for peer in [(1, os.getuid() + 4242, 0), None]:
        scope: dict[str, Any] = {
            "type": "http",
            "method": "GET",
            "path": "/v1/health",
            "headers": [],
            PEER_KEY: peer,
        }
        resp = await health(Request(scope))
        assert resp.status_code == 403
        assert b"pid" not in bytes(resp.body)


def test_unknown_fields_and_wrong_types_are_refused(
    start_daemon: Callable[..., Any], tmp_path: Path
) -> None:
    c = start_daemon().client()
    with pytest.raises(UsageError, match="does not take parameter"):
        list(c.stream("commands.run", {"argv": ["true"], "cwd": str(tmp_path), "bogus": 1}))
    with pytest.raises(UsageError, match=re.escape("'timeout_s' of commands.run must be")):
        list(c.stream("commands.run", {"argv": ["true"], "timeout_s": "soon"}))
    script = {"script": "/x.sh", "script_text": "#!/bin/sh\n", "cwd": str(tmp_path)}
    with pytest.raises(UsageError, match=re.escape("'env' of jobs.submit must be an object")):
        c.call("jobs.submit", {**script, "env": ["A=1"]})
    with pytest.raises(UsageError, match=re.escape("'args' of jobs.submit must be a list")):
        c.call("jobs.submit", {**script, "args": "a b"})
    assert c.call("jobs.list", {})["jobs"] == []
