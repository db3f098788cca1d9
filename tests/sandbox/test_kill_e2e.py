"""The kill switch ends a sandboxed session's whole tree within 2 s."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from .sandbox_helpers import User

MARKS = ("3137", "3138", "3139", "3140")  # background sleep, command, job, lease command


def _marked() -> dict[str, int]:
    """Live processes whose command line is `sleep <mark>`: mark -> pid."""
    out: dict[str, int] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        if len(argv) >= 2 and argv[0].endswith(b"sleep") and argv[1].decode() in MARKS:
            out[argv[1].decode()] = int(pid)
    return out


def _wait(cond: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_stop_ends_the_whole_tree_within_2s(unix_user: User, tmp_path: Path) -> None:
    user = unix_user
    project = user.home / "proj"
    project.mkdir()
    job = project / "job.sh"
    job.write_text("#!/bin/sh\nsleep 3139\n")
    script = (
        "sleep 3137 &\n"
        "tenantry run --where local -- /bin/sleep 3138 &\n"
        "tenantry submit ./job.sh >/dev/null\n"
        "tenantry run --where lease -- /bin/sleep 3140 &\n"
        "wait\n"
    )
    for p in (project, job):
        os.chown(p, user.uid, user.uid)
    # the daemon starts here; enough local slots for the job and the lease's pilot job
    assert user.tenantry("sessions", cwd=project, TENANTRY_LOCAL_SLOTS="8").returncode == 0
    cmd = ["setpriv", f"--reuid={user.uid}", f"--regid={user.uid}", "--init-groups", user.python]
    cmd += ["-m", "tenantry", "agent", "--agent", "codex", "--", "/bin/sh", "-c", script]
    log = tmp_path / "agent.log"
    agent = subprocess.Popen(cmd, cwd=project, env=user.env(), stderr=log.open("w"), text=True)
    try:
        try:
            _wait(lambda: len(_marked()) == 4, 60, "all four sleeps to run")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: have {_marked()}; {log.read_text()}") from None
        rows = json.loads(user.tenantry("sessions", "--json", cwd=project).stdout)["sessions"]
        sid = next(r["session"] for r in rows if r["kind"] == "sandboxed")
        t0 = time.monotonic()
        stop = user.tenantry("admin", "stop-session", sid, "--json", cwd=project)
        assert stop.returncode == 0, stop.stderr
        _wait(lambda: not _marked(), 2.0, f"every process to end (left: {_marked()})")
        elapsed = time.monotonic() - t0
        summary = json.loads(stop.stdout)
        assert summary["sandboxes_killed"] == 1, summary
        assert elapsed <= 2.0
        agent.wait(timeout=10)
        # refused on every surface: a client claiming the session on the user's socket
        claim = user.tenantry("jobs", cwd=project, TENANTRY_AGENT="codex", TENANTRY_SESSION=sid)
        assert claim.returncode != 0 and "stopped" in claim.stderr, claim.stderr
        mcp_like = user.tenantry(
            "run", "--", "/bin/true", cwd=project, TENANTRY_AGENT="codex", TENANTRY_SESSION=sid
        )
        assert mcp_like.returncode != 0 and "stopped" in mcp_like.stderr
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
