"""The pilot wire protocol: round trips and validation of every message."""

from __future__ import annotations

import asyncio
import json

import pytest

from tenantry.core.errors import PilotProtocolError
from tenantry.leases.pilot import protocol as p

MESSAGES: list[p.Message] = [
    p.Hello(
        lease="l-1",
        nonce="n1",
        slots=2,
        walltime_end=1.5e9,
        host="n1",
        pid=42,
        running=("c-1",),
        finished=("c-0",),
        draining=True,
    ),
    p.Welcome(heartbeat_s=5.0, nonce="n2", proof="ab"),
    p.Auth(proof="cd"),
    p.Reject(reason="wrong secret"),
    p.Heartbeat(ts=123.5, running=1),
    p.Run(id="c-1", argv=("python", "-c", "print('é')"), cwd="/tmp", env={"A": "b"}, timeout_s=3.0),
    p.Run(id="c-2", argv=("true",), cwd="/"),
    p.Run(id="c-5", argv=("true",), cwd="/", env_id="e1"),
    p.Env(id="e1", env={"PATH": "/bin", "X": "é"}),
    p.Output(id="c-1", stream="stderr", data=b"\x00\xffbinary\n"),
    p.Exit(
        id="c-1", state="failed", code=3, cpu_s=0.25, max_rss_kb=1024, duration_s=1.0, reason="x"
    ),
    p.Exit(id="c-3", state="refused", code=None, reason="pilot is draining"),
    p.Cancel(id="c-1"),
    p.Drain(reason="walltime"),
    p.Release(),
    p.Ack(ids=("c-1", "c-2")),
    p.Replay(
        results=(
            p.Exit(id="c-4", state="completed", code=0, stdout=b"out", stderr=b"", truncated=True),
        )
    ),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: type(m).__name__)
def test_round_trip(msg: p.Message) -> None:
    line = p.encode(msg)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    body = json.loads(line)
    assert body["v"] == p.VERSION and body["t"] == msg.t
    assert p.decode(line) == msg


def test_bytes_travel_as_base64() -> None:
    body = json.loads(p.encode(p.Output(id="c", stream="stdout", data=b"\xff")))
    assert body["data"] == "/w=="


def test_proofs_bind_key_role_lease_and_nonces() -> None:
    key = p.key_of("s3cret")
    good = p.proof(key, "pilot", "l-1", "a", "b")
    assert p.check(key, "pilot", "l-1", "a", "b", good)
    assert not p.check(key, "daemon", "l-1", "a", "b", good)
    assert not p.check(key, "pilot", "l-2", "a", "b", good)
    assert not p.check(key, "pilot", "l-1", "b", "a", good)
    assert not p.check(p.key_of("guess"), "pilot", "l-1", "a", "b", good)
    assert "s3cret" not in good


def _line(**d: object) -> bytes:
    return json.dumps({"v": 1, **d}).encode()


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "JSON object"),
        (json.dumps({"v": 2, "t": "cancel", "id": "x"}).encode(), "version"),
        (json.dumps({"t": "cancel", "id": "x"}).encode(), "version"),
        (_line(t="pickle", id="x"), "unknown pilot message type"),
        (_line(t="cancel"), "'id'"),
        (_line(t="cancel", id=3), "'id'"),
        (_line(t="run", id="c", argv=[], cwd="/"), "argv"),
        (_line(t="run", id="c", argv="ls -l", cwd="/"), "argv"),
        (_line(t="run", id="c", argv=["a\x00b"], cwd="/"), "NUL"),
        (_line(t="run", id="c", argv=["ls"], cwd="/", env={"A=B": "c"}), "env"),
        (_line(t="run", id="c", argv=["ls"], cwd="/", env={"A": 1}), "env"),
        (_line(t="run", id="c", argv=["ls"], cwd="/", timeout_s=0), "timeout_s"),
        (_line(t="output", id="c", stream="stdin", data=""), "stream"),
        (_line(t="output", id="c", stream="stdout", data="***"), "base64"),
        (_line(t="exit", id="c", state="exploded", code=0), "state"),
        (_line(t="exit", id="c", state="completed", code=True), "'code'"),
        (
            _line(t="hello", lease="l", nonce="n", slots="2", walltime_end=0, host="h", pid=1),
            "'slots'",
        ),
        (_line(t="heartbeat", ts=float("nan")), "'ts'"),
        (_line(t="replay", results={}), "results"),
    ],
)
def test_invalid_messages_are_rejected(line: bytes, needle: str) -> None:
    with pytest.raises(PilotProtocolError, match=needle):
        p.decode(line)


def test_unknown_fields_are_ignored() -> None:
    assert p.decode(_line(t="cancel", id="x", future_field=1)) == p.Cancel(id="x")


def test_oversized_messages_are_refused() -> None:
    big = p.Output(id="c", stream="stdout", data=b"x" * p.MAX_LINE)
    with pytest.raises(PilotProtocolError, match="exceeds"):
        p.encode(big)
    with pytest.raises(PilotProtocolError, match="exceeds"):
        p.decode(b" " * (p.MAX_LINE + 1))


async def test_recv_reads_messages_then_none_at_eof() -> None:
    reader = asyncio.StreamReader(limit=p.MAX_LINE + 1)
    reader.feed_data(p.encode(p.Cancel(id="a")) + p.encode(p.Ack(ids=("a",))))
    reader.feed_eof()
    assert await p.recv(reader) == p.Cancel(id="a")
    assert await p.recv(reader) == p.Ack(ids=("a",))
    assert await p.recv(reader) is None


async def test_recv_refuses_a_message_cut_by_eof() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(b'{"v":1,"t":"can')
    reader.feed_eof()
    with pytest.raises(PilotProtocolError, match="inside a message"):
        await p.recv(reader)


def test_an_unrunnable_run_names_its_command_instead_of_breaking_the_link() -> None:
    import json as _json

    import pytest as _pytest

    from tenantry.leases.pilot import protocol as _p

    line = _json.dumps({"t": "run", "v": 1, "id": "c9", "argv": ["echo", "a\x00b"], "cwd": "/"})
    with _pytest.raises(PilotProtocolError) as info:
        _p.decode(line.encode())
    assert info.value.details["command_id"] == "c9" and "NUL" in info.value.message
    bad_env = _json.dumps(
        {"t": "run", "v": 1, "id": "c10", "argv": ["true"], "cwd": "/", "env": {"A": "\x00"}}
    )
    with _pytest.raises(PilotProtocolError) as info:
        _p.decode(bad_env.encode())
    assert info.value.details["command_id"] == "c10"
