"""The pilot's own epoll set of command descriptors (``leases/pilot/fdset.py``)."""

from __future__ import annotations

import asyncio
import os

from tenantry.leases.pilot.fdset import FdSet


async def test_readers_fire_while_readable_and_stop_once_removed() -> None:
    fds = FdSet(asyncio.get_running_loop())
    r, w = os.pipe()
    seen: list[bytes] = []
    got = asyncio.Event()

    def readable() -> None:
        data = os.read(r, 10)
        seen.append(data)
        if data == b"b":
            fds.remove_reader(r)
            got.set()

    fds.add_reader(r, readable)
    os.write(w, b"a")
    await asyncio.sleep(0.05)
    os.write(w, b"b")
    await asyncio.wait_for(got.wait(), 5)
    os.write(w, b"c")  # no longer watched
    await asyncio.sleep(0.05)
    assert seen == [b"a", b"b"]
    fds.close()
    for fd in (r, w):
        os.close(fd)


async def test_a_number_reused_in_the_same_turn_is_not_called_for_the_old_event() -> None:
    """Two descriptors ready at once; the first one's callback closes the second and
    opens a new one that takes its number. The new one is not readable: it must not
    be called for the event the old one had."""
    fds = FdSet(asyncio.get_running_loop())
    a_r, a_w = os.pipe()
    b_r, b_w = os.pipe()
    calls: list[str] = []
    reused: list[int] = []
    done = asyncio.Event()

    def on_new() -> None:
        calls.append("new")

    def on_b() -> None:
        calls.append("b")
        os.read(b_r, 10)

    def on_a() -> None:
        calls.append("a")
        os.read(a_r, 10)
        fds.remove_reader(a_r)
        fds.remove_reader(b_r)
        os.close(b_r)
        n_r, n_w = os.pipe()  # the lowest free numbers: b_r's among them
        reused.extend((n_r, n_w))
        for fd in (n_r, n_w):
            if fd == b_r:
                fds.add_reader(fd, on_new)
        done.set()

    fds.add_reader(a_r, on_a)
    fds.add_reader(b_r, on_b)
    os.write(a_w, b"x")  # ready first: epoll reports in the order they became ready
    os.write(b_w, b"x")
    await asyncio.wait_for(done.wait(), 5)
    await asyncio.sleep(0.05)
    assert b_r in reused, "the test needs the new pipe to reuse the closed number"
    assert calls[0] == "a", "the test needs the first callback to run first"
    assert "new" not in calls
    fds.close()
    for fd in (a_r, a_w, b_w, *reused):
        os.close(fd)
