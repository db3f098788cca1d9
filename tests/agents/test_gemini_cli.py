"""Gemini CLI from npm, after `tenantry install --agent gemini-cli --user`, in a whole session."""

from __future__ import annotations

import json

import pytest
from tests.agents.fake_model import FakeModel, session_script
from tests.agents.harness import Sandbox, cli_path

pytestmark = [pytest.mark.agents, pytest.mark.slow]

SCRIPT = session_script(
    "run_shell_command", {"command": "squeue -u me"}, {"command": "shutdown -h now"}
)
# the user's own settings (API-key auth, no folder-trust prompt, no usage statistics)
USER_SETTINGS = (
    '{"security": {"auth": {"selectedType": "gemini-api-key"},'
    ' "folderTrust": {"enabled": false}},\n'
    ' "privacy": {"usageStatisticsEnabled": false}, "general": {"enableAutoUpdate": false}}\n'
)


def test_session_mcp_principal_hooks_and_clean_uninstall(sandbox: Sandbox) -> None:
    gemini = cli_path("gemini")
    settings = sandbox.home / ".gemini" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(USER_SETTINGS)
    before = sandbox.snapshot(settings.parent)
    sandbox.tenantry("install", "--agent", "gemini-cli", "--user", "--yes")
    with FakeModel(SCRIPT) as fm:
        r = sandbox.run(
            # a fixed model (-m): no routing classifier requests
            [gemini, "-p", "check the facility", "--yolo", "-m", "gemini-2.5-flash", "-o", "json"],
            GEMINI_API_KEY="fake",
            GOOGLE_GEMINI_BASE_URL=fm.url,
        )
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        results = list(fm.script.tool_results)
        offered = set(fm.script.offered)
    session = json.loads(r.stdout[r.stdout.index("{") :])["session_id"]
    assert "mcp_tenantry_facility_info" in offered
    assert len(results) == 3, results
    first = json.loads(results[0])["output"]
    you = json.loads(first[first.index("{") : first.rindex("}") + 1])["you"]
    # Gemini CLI gives its MCP servers no session id: it comes from the hook's record
    assert (you["agent"], you["session"]) == ("gemini-cli", session)
    assert "squeue goes through Tenantry" in results[1]
    assert "Tenantry policy" in results[2] and "shutdown" in results[2]
    assert sandbox.agent_sessions() == [("gemini-cli", session)]

    sandbox.tenantry("uninstall", "--agent", "gemini-cli", "--user", "--yes")
    after = {k: v for k, v in sandbox.snapshot(settings.parent).items() if k in before}
    assert after == before
    assert not (settings.parent / "GEMINI.md").exists()
