"""Codex from npm, after `tenantry install --agent codex --user`, in a whole session."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import tomlkit
from tests.agents.fake_model import FakeModel, Step, session_script
from tests.agents.harness import Sandbox, cli_path

pytestmark = [pytest.mark.agents, pytest.mark.slow]

SLOW_MCP = Path(__file__).with_name("slow_mcp.py")
SCRIPT = session_script("exec_command", {"cmd": "squeue -u me"}, {"cmd": "shutdown -h now"})


def user_config(url: str) -> str:
    return (
        "# my Codex settings\n"
        'model = "fake-model"\n'
        'model_provider = "fake"\n'
        'approval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n\n'
        "[model_providers.fake]\n"
        'name = "fake"\n'
        f'base_url = "{url}/v1"\n'
        'wire_api = "responses"\n'
        'env_key = "FAKE_API_KEY"\n'
    )


def test_session_mcp_principal_hooks_and_clean_uninstall(sandbox: Sandbox) -> None:
    codex = cli_path("codex")
    home = sandbox.home / ".codex"
    home.mkdir()
    with FakeModel(SCRIPT) as fm:
        (home / "config.toml").write_text(user_config(fm.url))
        before = sandbox.snapshot(home)
        done = sandbox.tenantry("install", "--agent", "codex", "--user", "--yes")
        assert "/hooks" in done.stdout  # the trust step is printed
        assert sandbox.tenantry("install", "--agent", "codex", "--user", "--yes").stdout.count(
            "nothing to do"
        )
        # Codex hands MCP servers almost no environment: the entry pins what finds the daemon
        r = sandbox.run(
            [
                codex,
                "exec",
                "--skip-git-repo-check",
                "--json",
                # what a person's trust in /hooks gives, without the interactive screen
                "--dangerously-bypass-hook-trust",
                "check the facility",
            ],
            CODEX_HOME=str(home),
            FAKE_API_KEY="sk-fake",
        )
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        first_tools = json.dumps(fm.script.requests[0]["body"].get("tools"))
        results = list(fm.script.tool_results)
    events = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    thread = next(e["thread_id"] for e in events if e.get("type") == "thread.started")
    assert "facility_info" in first_tools, "Tenantry's tools missing from the first turn"
    assert len(results) == 3, results
    you = json.loads(results[0][results[0].index("{") :])["you"]
    assert you["agent"] == "codex"
    assert you["session"] == thread, "the MCP call carries the Codex session id"
    assert "squeue goes through Tenantry" in results[1]
    assert "Tenantry" in results[2] and "shutdown" in results[2]
    assert sandbox.agent_sessions() == [("codex", thread)]

    sandbox.tenantry("uninstall", "--agent", "codex", "--user", "--yes")
    after = {k: v for k, v in sandbox.snapshot(home).items() if k.endswith("config.toml")}
    assert after == {k: v for k, v in before.items() if k.endswith("config.toml")}
    assert not (home / "hooks.json").exists() and not (home / "AGENTS.md").exists()


def test_execpolicy_rules_refuse_squeue_before_the_hooks_are_trusted(sandbox: Sandbox) -> None:
    codex = cli_path("codex")
    home = sandbox.home / ".codex"
    home.mkdir()
    script = [Step("exec_command", {"cmd": "squeue -u me"}), Step(text="all done")]
    with FakeModel(script) as fm:
        (home / "config.toml").write_text(user_config(fm.url))
        sandbox.tenantry("install", "--agent", "codex", "--user", "--yes")
        rules = home / "rules" / "tenantry.rules"
        check = sandbox.run([codex, "execpolicy", "check", "--rules", str(rules), "squeue"])
        assert json.loads(check.stdout)["decision"] == "forbidden", check.stdout + check.stderr
        # no --dangerously-bypass-hook-trust: the hooks are not trusted yet
        r = sandbox.run(
            [codex, "exec", "--skip-git-repo-check", "--json", "list my jobs"],
            CODEX_HOME=str(home),
            FAKE_API_KEY="sk-fake",
        )
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        results = list(fm.script.tool_results)
    assert "squeue goes through Tenantry" in " ".join(results) + r.stderr, (results, r.stderr)
    assert "JOBID" not in " ".join(results), "squeue ran"


def test_tools_are_in_the_first_turn_when_the_server_lists_them_late(sandbox: Sandbox) -> None:
    """Codex starts a turn without an optional MCP server that has not listed its tools yet."""
    codex = cli_path("codex")
    home = sandbox.home / ".codex"
    home.mkdir()
    with FakeModel([Step(text="all done")]) as fm:
        config = home / "config.toml"
        config.write_text(user_config(fm.url))
        sandbox.tenantry("install", "--agent", "codex", "--user", "--yes")
        # the entry as installed, its server answering tools/list 4 s late (a loaded node)
        doc = tomlkit.parse(config.read_text())
        server = doc["mcp_servers"]["tenantry"]
        server["args"] = [str(SLOW_MCP), "4", server["command"], *server["args"]]
        server["command"] = sys.executable
        config.write_text(tomlkit.dumps(doc))
        r = sandbox.run(
            [codex, "exec", "--skip-git-repo-check", "--json", "check the facility"],
            CODEX_HOME=str(home),
            FAKE_API_KEY="sk-fake",
        )
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        first_tools = json.dumps(fm.script.requests[0]["body"].get("tools"))
    assert "facility_info" in first_tools, "Tenantry's tools missing from the first turn"
