"""The PATH rule: an inherited PATH with a temp entry is the human's, not the agent's.

Denied only when the agent sets PATH itself, or when a program of the command
would really be found in an entry anyone can plant into.
"""

from __future__ import annotations

from pathlib import Path

from tenantry.core.models import Principal
from tenantry.safety.policy.judge import Judge

from ..conftest import stand_in

CWD = "/home/alice/proj"


def test_inherited_tmp_path_does_not_deny_every_command(judge: Judge, agent: Principal) -> None:
    env = {"PATH": "/tmp/tool-bin:/usr/local/bin:/usr/bin:/bin"}
    d = judge.evaluate(agent, "run_command", {"command": "ls -l", "cwd": CWD, "env": env})
    assert d.allowed, d.message


def test_agent_set_path_still_denied(judge: Judge, agent: Principal) -> None:
    env = {"PATH": "/usr/bin:/bin"}
    d = judge.evaluate(
        agent, "run_command", {"command": "PATH=/tmp/x:$PATH ls", "cwd": CWD, "env": env}
    )
    assert not d.allowed
    assert d.rule == "agent-no-env-hijack"


def test_program_found_in_planted_entry_denied(
    judge: Judge, agent: Principal, tmp_path: Path
) -> None:
    stand_in(tmp_path / "bin", "squeue", "exit 0")
    # a relative entry resolved from the command's cwd counts as unsafe
    env = {"PATH": "bin:/usr/bin:/bin"}
    d = judge.evaluate(
        agent, "run_command", {"command": "squeue", "cwd": str(tmp_path), "env": env}
    )
    assert not d.allowed
    assert d.rule == "agent-no-planted-program"
    ok = judge.evaluate(agent, "run_command", {"command": "ls", "cwd": str(tmp_path), "env": env})
    assert ok.allowed, ok.message
