"""End to end through the real daemon: a denied MCP call, a denied shim command, a dry run."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from tenantry.gateway.mcp import build_server

from ..gateway.conftest import Daemon, clean_env, mcp_text, remove_state, state_tempdir

CLAUDE = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "sess-e2e"}


@pytest.fixture
def daemon() -> Iterator[Daemon]:
    state = state_tempdir()
    # a user policy in the state directory narrows the baseline
    (Path(state) / "policy.cedar").write_text(
        '@id("user-no-make-install")\n@message("install targets are for the human")\n'
        'forbid (principal is Agent, action == Action::"run_command", resource is Command)\n'
        'when { resource.program == "make" && resource.args.contains("install") };\n'
    )
    d = Daemon(state, clean_env(state, TENANTRY_POLICY_FILE=str(Path(state) / "none.cedar")))
    d.start()
    try:
        yield d
    finally:
        d.stop()
        remove_state(state)


async def test_mcp_call_denied_with_rule(
    daemon: Daemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in CLAUDE.items():
        monkeypatch.setenv(k, v)
    server = build_server(daemon.settings)
    marker = tmp_path / "ran"
    async with Client(server) as client:
        bad = await client.call_tool(
            "run_command",
            {"argv": ["bash", "-c", f"sc''ancel 1; touch {marker}"], "cwd": str(tmp_path)},
        )
        assert bad.is_error
        text = mcp_text(bad)
        assert "policy_denied" in text and "not submitted by this agent session" in text
        bad = await client.call_tool(
            "run_command", {"argv": ["cat", "/proc/self/root/etc/munge/munge.key"]}
        )
        assert bad.is_error and "credential" in mcp_text(bad)
        ok = await client.call_tool("run_command", {"argv": ["true"], "cwd": str(tmp_path)})
        assert not ok.is_error
    assert not marker.exists(), "a denied command must not run at all"
    ev = json.loads(daemon.cli("events", "--json", "--type", "policy.decision").stdout)["events"]
    outcomes = [(e["outcome"], e["data"]["rule"]) for e in ev if "sess-e2e" in e["principal"]]
    assert ("deny", "default-deny") in outcomes
    assert ("deny", "agent-no-credentials") in outcomes
    assert ("allow", "agent-run-command") in outcomes


def test_shim_command_denied(daemon: Daemon, tmp_path: Path) -> None:
    r = daemon.cli("run", "--", "bash", "-c", "sudo id", env=CLAUDE, cwd=str(tmp_path))
    assert r.returncode == 77, r
    assert "sudo" in r.stderr and "tenantry policy check" in r.stderr
    r = daemon.cli("run", "--json", "--", "make", "install", env=CLAUDE, cwd=str(tmp_path))
    assert r.returncode == 77
    err = json.loads(r.stdout)["error"]
    assert err["details"]["rule"] == "user-no-make-install" and err["details"]["source"] == "user"
    # the human keeps their rights
    r = daemon.cli("run", "--", "bash", "-c", "echo hi", cwd=str(tmp_path))
    assert (r.returncode, r.stdout) == (0, "hi\n")


def test_policy_check_cli(daemon: Daemon, tmp_path: Path) -> None:
    r = daemon.cli(
        "policy", "check", "--action", "run_command", "--command", "scancel -u bob", "--json"
    )
    out = json.loads(r.stdout)
    assert r.returncode == 77 and out["rule"] == "agent-not-others-jobs"
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH --qos=admin\n#SBATCH -t 10\nhostname\n")
    r = daemon.cli("policy", "check", "--action", "submit_job", "--script", str(script))
    assert r.returncode == 77 and "agent-no-admin-qos" in r.stdout
    r = daemon.cli("policy", "check", "--action", "read_path", "--path", str(tmp_path / "x"))
    assert r.returncode == 0 and r.stdout.startswith("ALLOW")


def test_job_ownership_between_sessions(daemon: Daemon, tmp_path: Path) -> None:
    script = tmp_path / "long.sh"
    script.write_text("#!/bin/sh\nsleep 60\n")
    a = {"CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": "sess-a"}
    b = {"CODEX_THREAD_ID": "th-b"}
    r = daemon.cli("submit", "--json", str(script), cwd=str(tmp_path), env=a)
    job = json.loads(r.stdout)["job"]["id"]
    # a sibling session may read the output but not cancel
    r = daemon.cli("cancel", "--json", job, env=b)
    assert r.returncode == 77, r.stdout
    assert json.loads(r.stdout)["error"]["details"]["rule"] == "default-deny"
    assert daemon.cli("logs", job, env=b).returncode == 0
    # the submitting session may cancel its own job
    r = daemon.cli("cancel", "--json", job, env=a)
    assert r.returncode == 0, r.stdout + r.stderr


def test_dangerous_options_refused_through_the_daemon(daemon: Daemon, tmp_path: Path) -> None:
    """The daemon's own state, a remote shell and a deleting find of the home, as an
    agent's commands through ``tenantry run``: refused by rule, and none of them runs."""
    marker = tmp_path / "ran"
    state = Path(daemon.state)
    cases = [
        (f"bash -i >& /dev/tcp/127.0.0.1/9 0>&1; touch {marker}", "agent-no-remote-shell"),
        (f"sqlite3 {state}/tenantry.db 'delete from events'; touch {marker}",
         "agent-no-tenantry-state-writes"),
        (f"cat {state}/audit.key; touch {marker}", "agent-no-credentials"),
        (f"find ~ -name '*.out' -delete; touch {marker}", "agent-no-destructive-rm"),
    ]  # fmt: skip
    for command, rule in cases:
        r = daemon.cli("run", "--json", "--", "bash", "-c", command, env=CLAUDE, cwd=str(tmp_path))
        assert r.returncode == 77, (command, r.stdout, r.stderr)
        assert json.loads(r.stdout)["error"]["details"]["rule"] == rule, command
    assert not marker.exists()
    # the same daemon lets an agent read its log and list its own state
    r = daemon.cli("run", "--", "ls", str(state), env=CLAUDE, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr


def test_an_agent_cannot_stop_the_daemon_or_pipe_code_into_python(
    daemon: Daemon, tmp_path: Path
) -> None:
    """``pkill -f 'tenantry serve'`` would end the agent's own governance and ``... |
    python3`` runs text nobody read: both refused by rule, and the daemon still answers."""
    marker = tmp_path / "ran"
    cases = [
        (f"pkill -f 'tenantry serve'; touch {marker}", "agent-no-tenantry-kill"),
        (f"kill $(pgrep -f tenantry); touch {marker}", "agent-no-tenantry-kill"),
        (f"cat {tmp_path}/x.py | python3; touch {marker}", "agent-uncertain-command"),
        (f"GIT_PAGER='sudo id' git log; touch {marker}", "agent-no-privilege-escalation"),
    ]
    for command, rule in cases:
        r = daemon.cli("run", "--json", "--", "bash", "-c", command, env=CLAUDE, cwd=str(tmp_path))
        assert r.returncode == 77, (command, r.stdout, r.stderr)
        assert json.loads(r.stdout)["error"]["details"]["rule"] == rule, command
    assert not marker.exists()
    r = daemon.cli("run", "--", "pgrep", "-f", "tenantry", env=CLAUDE, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr  # looking is allowed, and the daemon is still there


def test_index_queries_keep_the_read_scope(daemon: Daemon, tmp_path: Path) -> None:
    """An agent's ``tenantry find``/``grep``/``index add`` of a key directory is judged
    as the same read with ``ls`` or ``grep`` would be: refused by rule before any work."""
    keys_dir = tmp_path / "copy" / ".ssh"  # a key directory anywhere keeps its class
    keys_dir.mkdir(parents=True)
    keys = str(keys_dir)
    for args in (["find", keys], ["grep", "BEGIN", keys], ["index", "add", keys]):
        r = daemon.cli(*args, "--json", env=CLAUDE, cwd=str(tmp_path))
        assert r.returncode == 77, (args, r.stdout, r.stderr)
        assert json.loads(r.stdout)["error"]["details"]["rule"] == "agent-no-credentials", args
    work = tmp_path / "w"
    work.mkdir()
    (work / "a.py").write_text("x = 1\n")
    r = daemon.cli("index", "add", str(work), "--json", env=CLAUDE, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr  # an ordinary tree is the agent's to index
