"""Through the real daemon: the kill switch during a running command and job."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import PermissionDenied, SessionStopped


def wait_for(cond: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    return sys.modules["_tenantry_gateway_test_helpers"].wait_for(cond, timeout, what)


AGENT_ENV = {"TENANTRY_AGENT": "codex", "TENANTRY_SESSION": "s1"}


def test_stop_session_during_running_work(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon()
    agent = d.client(agent="codex", session="s1")
    human = d.client()
    script = tmp_path / "long.sh"
    script.write_text("#!/bin/sh\nsleep 60\n")
    job = agent.call(
        "jobs.submit",
        {"script": str(script), "script_text": script.read_text(), "cwd": str(tmp_path)},
    )["job"]
    wait_for(
        lambda: agent.call("jobs.status", {"ids": [job["id"]]})["jobs"][0]["state"] == "RUNNING",
        what="agent job running",
    )
    chunks: list[dict[str, Any]] = []
    errors: list[BaseException] = []

    def long_command() -> None:
        try:
            chunks.extend(agent.stream("commands.run", {"argv": ["sleep", "60"], "cwd": d.state}))
        except BaseException as exc:
            errors.append(exc)

    t = threading.Thread(target=long_command)
    t.start()
    gw = sys.modules["_tenantry_gateway_test_helpers"]
    wait_for(lambda: gw.command_states(d.state) == ["running"], what="the command's journal row")
    # the human's own shell process, outside Tenantry, must survive
    own_shell = subprocess.Popen(["sleep", "30"])
    try:
        r = d.cli("admin", "stop-session", "s1", "--reason", "runaway sweep", "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        summary = json.loads(r.stdout)
        assert summary["jobs_cancelled"] == [job["id"]]
        assert summary["commands_ended"] == 1
        t.join(timeout=20)
        assert not t.is_alive()
        assert not errors, errors
        assert chunks[-1]["result"]["state"] == "failed"
        state = human.call("jobs.list", {})["jobs"]
        assert {j["id"]: j["state"] for j in state}[job["id"]] == "CANCELLED"
        assert own_shell.poll() is None  # untouched

        with pytest.raises(SessionStopped, match="runaway sweep"):
            agent.call("jobs.list", {})
        refused = d.cli("run", "--", "true", env=AGENT_ENV)
        assert refused.returncode == 77 and "stopped" in refused.stderr
        # other sessions and the human keep working
        assert list(human.stream("commands.run", {"argv": ["true"], "cwd": d.state}))
        assert d.client(agent="codex", session="s2").call("jobs.list", {}) is not None
        # a stopped agent is refused outright; another agent cannot lift the stop either
        with pytest.raises(SessionStopped):
            agent.call("admin.resume_session", {"session": "s1"})
        with pytest.raises(PermissionDenied, match="for humans"):
            d.client(agent="codex", session="s2").call("admin.resume_session", {"session": "s1"})
        stopped = json.loads(d.cli("admin", "stopped", "--json").stdout)["stopped"]
        assert [(s["kind"], s["target"]) for s in stopped] == [("session", "s1")]

        denied = [
            e for e in human.call("events.list", {})["events"] if e["type"] == "request.denied"
        ]
        assert any(e["outcome"] == "session_stopped" for e in denied)
        # the agent's attempt at an admin op is on record too
        assert any(e["subject"] == "admin.resume_session" for e in denied)

        assert d.cli("admin", "resume-session", "s1").returncode == 0
        assert agent.call("jobs.list", {}) is not None
    finally:
        own_shell.kill()
        own_shell.wait()


def test_stop_user_spares_the_humans_commands(start_daemon: Any) -> None:
    d = start_daemon()
    human = d.client()
    agents = [d.client(agent="claude-code", session=s) for s in ("a", "b")]
    for a in agents:
        a.call("jobs.list", {})
    r = d.cli("admin", "stop-user", human.call("sessions.list", {})["sessions"][0]["user"])
    assert r.returncode == 0, r.stderr
    for a in agents:
        with pytest.raises(SessionStopped):
            a.call("jobs.list", {})
    out = list(human.stream("commands.run", {"argv": ["echo", "still here"], "cwd": d.state}))
    assert out[-1]["result"]["exit_code"] == 0
