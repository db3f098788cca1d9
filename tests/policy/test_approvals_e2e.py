"""Through the real daemon: an @ask rule holds an agent's write; the human approves it.

The agent gets "waiting for approval ID" and can wait on it; a session cannot
approve; ``once`` grants are used up; ``session`` grants cover the session and
rule only; refusals and expiry hold; every decision reaches the audit events.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import ApprovalRequired, PermissionDenied, PolicyDenied


def hook_write(client: Any, path: Path) -> list[dict[str, Any]]:
    repo = path.parent.parent.parent  # <repo>/.git/hooks/<name>
    argv = ["cp", str(repo / "hook.sh"), str(path)]
    return list(client.stream("commands.run", {"argv": argv, "cwd": str(repo)}))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / ".git" / "hooks").mkdir(parents=True)
    (tmp_path / "hook.sh").write_text("#!/bin/sh\nexit 0\n")
    return tmp_path


def test_held_then_approved_once(start_daemon: Any, repo: Path) -> None:
    d = start_daemon()
    agent = d.client(agent="codex", session="s1")
    target = repo / ".git" / "hooks" / "pre-commit"
    with pytest.raises(ApprovalRequired) as info:
        hook_write(agent, target)
    ref = info.value.details["approval"]
    assert "waiting for approval" in info.value.message and ref in (info.value.hint or "")
    assert not target.exists()
    # the session cannot approve itself, through the op or the CLI
    with pytest.raises(PermissionDenied):
        agent.call("approvals.decide", {"id": ref})
    env = {"TENANTRY_AGENT": "codex", "TENANTRY_SESSION": "s1"}
    assert d.cli("approve", ref, env=env).returncode == 77
    # the agent waits; the human approves from their own shell
    waited: dict[str, Any] = {}
    t = threading.Thread(
        target=lambda: waited.update(agent.call("approvals.wait", {"id": ref, "timeout_s": 30}))
    )
    t.start()
    out = d.cli("approve", ref, "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    t.join(timeout=30)
    assert waited["approval"]["status"] == "approved" and not waited["timed_out"]
    assert hook_write(agent, target)[-1]["result"]["exit_code"] == 0
    assert target.exists()
    # once is once
    target.unlink()
    with pytest.raises(ApprovalRequired):
        hook_write(agent, target)
    listing = json.loads(d.cli("approvals", "--json").stdout)["approvals"]
    assert [a["status"] for a in listing][:2] == ["used", "pending"]
    events = d.client().call("events.list", {"types": ["policy.decision"]})
    subjects = {e["subject"] for e in events.get("events", [])}
    assert {"approval.held", "approval.approved", "approval.used"} <= subjects


def test_session_scope_and_refusal(start_daemon: Any, repo: Path) -> None:
    d = start_daemon()
    s1 = d.client(agent="codex", session="s1")
    s2 = d.client(agent="codex", session="s2")
    a = repo / ".git" / "hooks" / "pre-push"
    with pytest.raises(ApprovalRequired) as info:
        hook_write(s1, a)
    ok = d.cli("approve", info.value.details["approval"], "--scope", "session")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    b = repo / ".git" / "hooks" / "post-merge"
    assert hook_write(s1, b)[-1]["result"]["exit_code"] == 0  # same session, same rule
    with pytest.raises(ApprovalRequired) as other:
        hook_write(s2, a)  # another session is not covered
    assert d.cli("approve", other.value.details["approval"], "--refuse").returncode == 0
    with pytest.raises(ApprovalRequired):
        hook_write(s2, a)  # refused: held again, not run
    # a denial that is not an @ask rule is never held
    with pytest.raises(PolicyDenied) as hard:
        list(s1.stream("commands.run", {"argv": ["sudo", "id"], "cwd": str(repo)}))
    assert not isinstance(hard.value, ApprovalRequired)
