"""OpenCode from npm, after `tenantry install --agent opencode --user`, in a whole session."""

from __future__ import annotations

import json

import pytest
from tests.agents.fake_model import FakeModel, session_script
from tests.agents.harness import Sandbox, cli_path

pytestmark = [pytest.mark.agents, pytest.mark.slow]

SCRIPT = session_script(
    "bash",
    {"command": "squeue -u me", "description": "list my jobs"},
    {"command": "shutdown -h now", "description": "stop"},
)


def user_config(url: str) -> str:
    return (
        json.dumps(
            {
                "$schema": "https://opencode.ai/config.json",
                "autoupdate": False,
                "share": "disabled",
                "model": "anthropic/claude-sonnet-4-5",
                "provider": {"anthropic": {"options": {"baseURL": f"{url}/v1", "apiKey": "x"}}},
            }
        )
        + "\n"
    )


def test_session_mcp_principal_plugin_and_clean_uninstall(sandbox: Sandbox) -> None:
    opencode = cli_path("opencode")
    cfg = sandbox.home / ".config" / "opencode"
    cfg.mkdir(parents=True)
    with FakeModel(SCRIPT) as fm:
        (cfg / "opencode.json").write_text(user_config(fm.url))
        before = sandbox.snapshot(cfg)
        sandbox.tenantry("install", "--agent", "opencode", "--user", "--yes")
        r = sandbox.run([opencode, "run", "check the facility"], timeout=150)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        results = list(fm.script.tool_results)
        offered = set(fm.script.offered)
    assert "tenantry_facility_info" in offered
    assert len(results) == 3, results
    you = json.loads(results[0])["you"]
    agents = sandbox.agent_sessions()
    # OpenCode gives its MCP servers no session id: it comes from the plugin's session event
    assert agents == [("opencode", you["session"])] and you["session"]
    assert you["agent"] == "opencode"
    assert "squeue goes through Tenantry" in results[1]
    assert "Tenantry policy" in results[2] and "shutdown" in results[2]

    sandbox.tenantry("uninstall", "--agent", "opencode", "--user", "--yes")
    after = {k: v for k, v in sandbox.snapshot(cfg).items() if k in before}
    assert after == before
    assert not (cfg / "plugins" / "tenantry.js").exists()
