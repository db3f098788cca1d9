"""The spawner tells the daemon a command's pid at once, not with its next batch."""

from __future__ import annotations

import json
import os
import signal
import socket

from tenantry.commands.spawner import Spawner


def test_each_pid_is_on_the_socket_before_the_next_command_starts() -> None:
    ours, theirs = socket.socketpair()
    sp = Spawner(theirs)
    pids: list[int] = []
    try:
        for n in (1, 2, 3):  # one batch of runs, as the daemon sends them in a burst
            sp.run(n, ["sleep", "30"], "/", 0, 0)
            ours.setblocking(False)
            got = ours.recv(65536).decode()  # raises BlockingIOError if it waits in a batch
            msgs = [json.loads(line) for line in got.splitlines()]
            assert [m[:2] for m in msgs] == [["pid", n]]
            pids.append(int(msgs[0][2]))
    finally:
        for pid in pids:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        ours.close()
        theirs.close()
