"""Commands end with the daemon that ran them, and are recorded as such.

Documented choice (docs/faults.md): a ``tenantry run`` command is short and
its client's stream dies with the daemon, so the command ends too: its child
gets SIGKILL at once (PR_SET_PDEATHSIG) and the rest of its process group is
ended on the next start; its record says ``lost`` with the reason.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tenantry.core.errors import TenantryError

gw: Any = sys.modules["_tenantry_gateway_test_helpers"]  # loaded by tests/conftest.py


def _pids_with(marker: str) -> list[int]:
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes()
            state = (proc / "stat").read_text().rpartition(")")[2].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state != "Z":
            out.append(int(proc.name))
    return out


def test_commands_end_with_a_crashed_daemon(
    fault_daemon: Callable[..., Any], tmp_path: Path
) -> None:
    d = fault_daemon()
    marker = f"tnt-orphan-{os.getpid()}-{tmp_path.name}"
    sleeper = f"{sys.executable} -c 'import time; time.sleep(300)'"
    script = tmp_path / "cmd.sh"
    # a child in the background and one in the foreground, both long
    script.write_text(f"#!/bin/sh\n{sleeper} bg-{marker} &\n{sleeper} fg-{marker}\n")
    script.chmod(0o700)

    def run() -> None:
        c = d.client()
        params = {"argv": ["/bin/sh", str(script)], "cwd": str(tmp_path), "where": "local"}
        try:
            for _ in c.stream("commands.run", params):
                pass
        except TenantryError:
            pass  # the daemon died under it

    t = threading.Thread(target=run, daemon=True)
    t.start()
    gw.wait_for(lambda: len(_pids_with(marker)) == 2, what="the command's processes")
    db = d.settings.db_path

    def recorded() -> bool:
        with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
            row = conn.execute("SELECT pid FROM commands WHERE state='running'").fetchone()
        return bool(row and row[0])

    gw.wait_for(recorded, what="the command's pid in the journal")
    d.kill(signal.SIGKILL)
    t.join(timeout=30)
    # the command's own process ended with the daemon at once
    gw.wait_for(lambda: not _pids_with(str(script)), what="the command to end with the daemon")
    d.start()
    # what it left behind in its process group was ended on the restart
    gw.wait_for(lambda: not _pids_with(marker), what="the command's children to be ended")
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as conn:
        state, reason = conn.execute("SELECT state, reason FROM commands").fetchone()
    assert state == "lost" and "daemon stopped" in reason
