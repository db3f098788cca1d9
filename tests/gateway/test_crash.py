"""SIGKILL the daemon with jobs queued and running: nothing submitted is lost."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from .conftest import Daemon, command_states, wait_for

pytestmark = pytest.mark.own_daemon  # every test here kills its daemon


def _submit(d: Daemon, tmp: Path, body: str, *extra: str) -> str:
    s = tmp / f"job{time.monotonic_ns()}.sh"
    s.write_text("#!/bin/sh\n" + body)
    r = d.cli("submit", "--json", "--force", *extra, str(s), cwd=str(tmp))
    assert r.returncode == 0, r.stderr
    return str(json.loads(r.stdout)["job"]["id"])


def test_sigkill_with_jobs_queued_and_running(daemon: Daemon, tmp_path: Path) -> None:
    marker = tmp_path / "go"
    # two slots: two long-ish jobs run, the rest wait in the queue
    running = [
        _submit(
            daemon,
            tmp_path,
            f"while [ ! -e {marker} ]; do sleep 0.05; done; echo ran\n",
            "--cpus",
            "1",
        )
        for _ in range(2)
    ]
    doomed = _submit(daemon, tmp_path, "sleep 60\n", "--cpus", "2")
    queued = [_submit(daemon, tmp_path, "echo queued-ok\n") for _ in range(3)]
    c = daemon.client()
    wait_for(
        lambda: all(
            j["state"] == "RUNNING" for j in c.call("jobs.status", {"ids": running})["jobs"]
        ),
        what="first jobs running",
    )
    before = {j["id"] for j in c.call("jobs.list", {})["jobs"]}
    assert {*running, doomed, *queued} <= before

    daemon.kill(signal.SIGKILL)
    # while the daemon is down: the running jobs finish on their own
    marker.write_text("")
    wait_for(
        lambda: sum(1 for p in tmp_path.glob("tenantry-*.out") if "ran" in p.read_text()) == 2,
        what="running jobs to finish while the daemon is down",
    )
    daemon.start()
    c = daemon.client()
    after = {j["id"] for j in c.call("jobs.list", {})["jobs"]}
    assert before <= after, "a submitted job was lost"
    for jid in running:
        job = c.call("jobs.status", {"ids": [jid]})["jobs"][0]
        job = wait_for(lambda jid=jid: _done(c, jid), what=f"{jid} terminal")
        assert (job["state"], job["exit_code"]) == ("COMPLETED", 0), job
    # the 2-CPU job was queued (FIFO, ahead of the rest): it survived the crash too
    assert c.call("jobs.status", {"ids": [doomed]})["jobs"][0]["state"] in {"PENDING", "RUNNING"}
    c.call("jobs.cancel", {"id": doomed})
    assert wait_for(lambda: _done(c, doomed))["state"] == "CANCELLED"
    # the queued ones run after the restart
    for jid in queued:
        job = wait_for(lambda jid=jid: _done(c, jid), what=f"{jid} terminal")
        assert job["state"] == "COMPLETED", job


def _done(c: object, jid: str) -> dict[str, object] | None:
    job: dict[str, object] = c.call("jobs.status", {"ids": [jid]})["jobs"][0]  # type: ignore[attr-defined]
    return job if job["terminal"] else None


def test_job_killed_while_daemon_down_is_reported(daemon: Daemon, tmp_path: Path) -> None:
    jid = _submit(daemon, tmp_path, "sleep 60\n")
    c = daemon.client()
    job = wait_for(
        lambda: (j := c.call("jobs.status", {"ids": [jid]})["jobs"][0])["state"] == "RUNNING" and j
    )
    daemon.kill(signal.SIGKILL)
    # kill the job's whole process group behind the daemon's back
    job_dir = Path(daemon.state) / "local" / "jobs" / str(job["backend_id"])
    pid = wait_for(
        lambda: json.loads((job_dir / "status.json").read_text()).get("pid"), what="job pid"
    )
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), what="job gone")
    daemon.start()
    c = daemon.client()
    final = wait_for(lambda: _done(c, jid), what="job terminal")
    assert final["state"] == "LOST"
    assert "daemon was down" in str(final["reason"])


def test_commands_running_at_crash_are_marked(daemon: Daemon) -> None:
    import subprocess
    import sys

    p = subprocess.Popen(
        [sys.executable, "-m", "tenantry", "run", "--", "sleep", "30"],
        env=daemon.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    wait_for(lambda: command_states(daemon.state) == ["running"], what="the command's journal row")
    daemon.kill(signal.SIGKILL)
    p.wait(timeout=20)
    assert p.returncode != 0
    daemon.start()
    assert command_states(daemon.state) == ["lost"]
