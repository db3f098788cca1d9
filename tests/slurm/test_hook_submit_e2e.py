"""The daemon's hook submits an agent's ``sbatch`` itself, on the real Slurm.

A Claude Code payload goes to the daemon's ``POST /v1/hook/claude-code`` (the
Unix socket: the lean command hook's way in; the http hook's is the same code
on loopback TCP), and the job is checked where Slurm keeps it.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tenantry.agents import hook
from tenantry.backends import slurm_parse as sp
from tenantry.core import attribution

from ..integrations.test_hook_daemon import _post_unix
from .conftest import Env

pytestmark = pytest.mark.slurm

SESSION = "e2e-sess"  # the session Env's agent environment claims (CLAUDE_CODE_SESSION_ID)


def _ask(env: Env, command: str, tool_use: str, **extra: Any) -> str:
    """The reason of the hook's denial of ``command`` ("" when it has no opinion)."""
    payload = {
        "hook_event_name": "PreToolUse",
        "session_id": SESSION,
        "cwd": str(env.work),
        "permission_mode": "bypassPermissions",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": tool_use,
        **extra,
    }
    status, text = _post_unix(env.state + "/sock", "claude-code", json.dumps(payload))
    assert status == 200, text
    if not text.strip():
        return ""
    out = json.loads(text)["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny", out
    return str(out["permissionDecisionReason"])


def _jobs(env: Env) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = env.client().call("jobs.list", {"all": True})["jobs"]
    return jobs


def _send_environment(env: Env) -> None:
    """What any Tenantry command of the session does: its environment reaches the daemon."""
    params = {"argv": ["true"], "cwd": str(env.work), "env": env.agent, "where": "local"}
    for _chunk in env.client().stream("commands.run", params):
        pass


def test_the_hook_submits_a_plain_sbatch_through_the_daemon(env: Env) -> None:
    (env.work / "job.sh").write_text("#!/bin/sh\n#SBATCH --cpus-per-task=1\nsleep 30\n")
    command = "sbatch --parsable -J hook-e2e -t 1 --mem 64M job.sh"
    # a session that has sent the daemon no environment: the redirect, nothing submitted
    first = _ask(env, command, "toolu_e2e_0")
    assert "tenantry submit" in first and not first.startswith(hook.ANSWERED), first
    assert not _jobs(env)
    _send_environment(env)
    answer = _ask(env, command, "toolu_e2e_1")
    assert answer.startswith(hook.ANSWERED), answer
    backend_id = answer.rsplit("\n", 1)[1]
    assert backend_id.isdigit(), answer
    try:
        real = subprocess.run(
            ["scontrol", "show", "job", backend_id], capture_output=True, text=True, check=True
        ).stdout
        (rec,) = sp.parse_scontrol(real)
        assert rec["JobName"] == "hook-e2e" and rec["TimeLimit"] == "00:01:00", rec
        assert rec["StdOut"] == str(env.work / f"slurm-{backend_id}.out"), rec
        assert rec["WorkDir"] == str(env.work), rec
        tag = attribution.parse(rec["Comment"])
        assert tag is not None and tag["agent"] == "claude-code" and tag["session"] == SESSION
        # the same tool call's other hook (where Claude Code runs two hooks of one
        # sbatch in parallel) gets the same job, not a second one
        again = _ask(env, command, "toolu_e2e_1")
        assert again.startswith(hook.ANSWERED) and again.endswith("\n" + backend_id), again
        ours = [j for j in _jobs(env) if j["name"] == "hook-e2e"]
        assert [j["backend_id"] for j in ours] == [backend_id]
        # what it cannot read exactly, and a refusal, are the redirect; nothing is submitted
        for n, other in enumerate(
            [
                "sbatch --wrap 'sleep 1'",
                "sbatch < job.sh",
                "sbatch --exclusive job.sh",
                "sbatch -a 0-5000 job.sh",  # agent arrays are capped by the baseline policy
            ]
        ):
            said = _ask(env, other, f"toolu_e2e_f{n}")
            assert "tenantry submit" in said and not said.startswith(hook.ANSWERED), said
        assert [j["backend_id"] for j in _jobs(env)] == [backend_id]
        decided = env.client().call(
            "events.list", {"since": -600, "types": ["policy.decision"], "limit": 200}
        )["events"]
        refused = [e for e in decided if (e.get("data") or {}).get("rule") == "agent-array-cap"]
        assert refused and refused[-1]["outcome"] == "deny", decided
    finally:
        subprocess.run(["scancel", backend_id], check=False)
