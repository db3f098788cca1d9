"""Through the real daemon: the login node runs only cheap commands, whatever the agent asks.

With ``login_node_policy=enforce`` on the embedded backend a lease is a local
pilot process, so the rerouting runs for real without a scheduler.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import PolicyDenied

# the user's own narrowing rule: it can only hold if context.where is the real location
NO_PYTHON_ON_LOGIN = """
@id("user-no-python-on-login")
@message("python runs on a lease, not on the login node")
forbid (principal, action == Action::"run_command", resource is Command)
when { context.where == "login" && resource.program like "python*" };
"""


def run(client: Any, argv: list[str], cwd: Path, where: str) -> dict[str, Any]:
    params = {"argv": argv, "cwd": str(cwd), "where": where}
    chunks = list(client.stream("commands.run", params))
    result: dict[str, Any] = chunks[-1]["result"]
    return result


def test_agent_where_local_is_a_preference(start_daemon: Any, tmp_path: Path) -> None:
    d = start_daemon(
        {"policy.cedar": NO_PYTHON_ON_LOGIN},
        TENANTRY_LOGIN_NODE_POLICY="enforce",
        TENANTRY_LEASE_IDLE_S="30",
    )
    agent = d.client(agent="codex", session="s1")
    (tmp_path / "notes.txt").write_text("hello\n")
    cheap = run(agent, ["cat", "notes.txt"], tmp_path, "local")
    assert (cheap["exit_code"], cheap["where"], cheap["stdout_tail"]) == (0, "local", "hello\n")
    assert cheap["note"] == ""
    heavy = run(agent, [sys.executable, "-c", "print('on a lease')"], tmp_path, "local")
    assert (heavy["exit_code"], heavy["where"]) == (0, "lease"), heavy
    assert heavy["stdout_tail"] == "on a lease\n"
    assert "allow-list" in heavy["note"]
    # a human's explicit where=local is honoured, so the context says login and the rule holds
    human = d.client()
    with pytest.raises(PolicyDenied, match="not on the login node"):
        run(human, [sys.executable, "-c", "print(1)"], tmp_path, "local")
