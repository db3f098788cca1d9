"""The wire codec's response parser: any split of the bytes gives the same events."""

from __future__ import annotations

import pytest

from tenantry.client.wire import END, Head, Lines, Parser, WireError, encode_request, env_digest

PLAIN = (
    b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{"ok":true}'
)
CHUNKED = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
    b'6\r\n{"a":1\r\n3\r\n}\n\n\r\n'
    b'e\r\n{"result": 7}\n\r\n0\r\n\r\n'
)


def _events(data: bytes, step: int) -> list[object]:
    p = Parser()
    out: list[object] = []
    for i in range(0, len(data), step):
        out.extend(p.feed(data[i : i + step]))
    return out


def _flatten(events: list[object]) -> tuple[int, bytes, int]:
    heads = [e for e in events if isinstance(e, Head)]
    body = b"".join(e for e in events if isinstance(e, bytes))
    return heads[0].status, body, events.count(END)


@pytest.mark.parametrize("step", [1, 2, 3, 7, 64, 10_000])
def test_any_split_gives_the_same_response(step: int) -> None:
    assert _flatten(_events(PLAIN, step)) == (200, b'{"ok":true}', 1)
    status, body, ends = _flatten(_events(CHUNKED, step))
    assert (status, ends) == (200, 1)
    lines = Lines()
    assert lines.feed(body) + lines.close() == [b'{"a":1}', b'{"result": 7}']


def test_responses_back_to_back_on_one_connection() -> None:
    events = _events(PLAIN + CHUNKED + PLAIN, 5)
    assert [e.status for e in events if isinstance(e, Head)] == [200, 200, 200]
    assert events.count(END) == 3


def test_garbage_is_a_wire_error() -> None:
    with pytest.raises(WireError):
        Parser().feed(b"SSH-2.0-OpenSSH\r\n\r\n")


def test_request_bytes_and_digest() -> None:
    raw = encode_request("POST", "/v1/op/x", b"{}", {"X-Tenantry-Principal": "{}"})
    assert raw.startswith(b"POST /v1/op/x HTTP/1.1\r\n") and raw.endswith(b"\r\n\r\n{}")
    assert b"Content-Length: 2\r\n" in raw
    with pytest.raises(ValueError):
        encode_request("POST", "/v1/op/x", b"", {"X": "a\r\nInjected: 1"})
    assert env_digest({"B": "2", "A": "1"}) == env_digest({"A": "1", "B": "2"})
    assert env_digest({"A": "1"}) != env_digest({"A": "2"})
