"""A sealed link writes once per turn of the event loop, its acks as one message."""

from __future__ import annotations

import asyncio
from typing import cast

from tenantry.leases.pilot import protocol as p


class Writer:
    """What the outbox needs of a stream writer: writes recorded."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closing


def _sealed() -> tuple[Writer, asyncio.StreamReader, p.Seal]:
    reader = asyncio.StreamReader()
    w = Writer()
    writer = cast(asyncio.StreamWriter, w)
    key = p.key_of("secret")
    p.seal(reader, writer, key, me="daemon", lease="l-1", pilot_nonce="pn", daemon_nonce="dn")
    peer = p.Seal(p.link_key(key, "l-1", "pn", "dn"), "pilot", "daemon")
    return w, reader, peer


def _opened(peer: p.Seal, data: bytes) -> list[p.Message]:
    return [peer.open(line + b"\n") for line in data.split(b"\n") if line]


async def test_one_turn_of_runs_and_acks_is_one_write_in_order() -> None:
    """The measured cost: each run and each ack was a write (a TCP segment, a wakeup
    of the pilot) of its own; a burst now costs one write per turn."""
    w, reader, peer = _sealed()
    writer = cast(asyncio.StreamWriter, w)
    runs = [p.Run(id=f"c-{i}", argv=("true",), cwd="/") for i in range(3)]
    for run in runs[:2]:
        p.send(writer, run)
    p.ack(writer, "c-0")
    p.send(writer, runs[2])
    p.ack(writer, "c-1")
    assert w.writes == []  # nothing written inside the turn
    await asyncio.sleep(0)
    assert len(w.writes) == 1
    got = _opened(peer, w.writes[0])
    assert got == [*runs, p.Ack(ids=("c-0", "c-1"))]
    p.send(writer, p.Cancel(id="c-2"))
    await asyncio.sleep(0)
    assert len(w.writes) == 2 and _opened(peer, w.writes[1]) == [p.Cancel(id="c-2")]
    p.unseal(reader, writer)


async def test_what_is_queued_is_written_when_the_link_is_unsealed() -> None:
    w, reader, peer = _sealed()
    writer = cast(asyncio.StreamWriter, w)
    p.send(writer, p.Drain(reason="walltime"))
    p.unseal(reader, writer)  # the connection ends in this turn
    assert _opened(peer, b"".join(w.writes)) == [p.Drain(reason="walltime")]
    await asyncio.sleep(0)
    assert len(w.writes) == 1
    p.send(writer, p.Drain(reason="x"))  # unsealed now: written at once, not sealed
    assert w.writes[-1] == p.encode(p.Drain(reason="x"))


async def test_a_closing_writer_gets_nothing_more() -> None:
    w, reader, _peer = _sealed()
    writer = cast(asyncio.StreamWriter, w)
    p.send(writer, p.Cancel(id="c-1"))
    w.closing = True
    await asyncio.sleep(0)
    assert w.writes == []
    p.unseal(reader, writer)
