"""Claude Code from npm, after `tenantry install --agent claude-code`, in a whole session."""

from __future__ import annotations

import json

import pytest
from tests.agents.fake_model import FakeModel, session_script
from tests.agents.harness import Sandbox, cli_path

pytestmark = [pytest.mark.agents, pytest.mark.slow]

SCRIPT = session_script(
    "Bash",
    {"command": "squeue -u me", "description": "list my jobs"},
    {"command": "rm -rf ~", "description": "clean up"},
)

# a user's own settings, in their own formatting, that uninstall must give back byte for byte
USER_SETTINGS = (
    '{"permissions":{"allow":["Read"]},\n'
    '  "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "true"}]}]}}\n'
)
USER_CLAUDE_MD = "# my notes\n\nbe brief\n"


def test_session_mcp_hooks_principal_and_clean_uninstall(sandbox: Sandbox) -> None:
    claude = cli_path("claude")
    (sandbox.project / ".claude").mkdir()
    (sandbox.project / ".claude" / "settings.json").write_text(USER_SETTINGS)
    (sandbox.project / "CLAUDE.md").write_text(USER_CLAUDE_MD)
    before = sandbox.snapshot()

    sandbox.tenantry(
        "install", "--agent", "claude-code", "--project", str(sandbox.project), "--yes"
    )
    installed = sandbox.snapshot()
    sandbox.tenantry(
        "install", "--agent", "claude-code", "--project", str(sandbox.project), "--yes"
    )
    assert sandbox.snapshot() == installed, "installing twice changed files"
    # project .mcp.json servers need the user's approval; this is what the approval writes
    settings = json.loads((sandbox.project / ".claude" / "settings.json").read_text())
    assert settings["hooks"]["PreToolUse"][0]["matcher"] == "Bash"

    with FakeModel(SCRIPT) as fm:
        r = sandbox.run(
            [
                claude,
                "-p",
                "check the facility",
                "--output-format",
                "stream-json",
                "--verbose",
                "--allowedTools",
                "mcp__tenantry__facility_info,Bash",
                "--mcp-config",
                str(sandbox.project / ".mcp.json"),
            ],
            ANTHROPIC_BASE_URL=fm.url,
            ANTHROPIC_API_KEY="sk-fake",
        )
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        results = list(fm.script.tool_results)
        offered = set(fm.script.offered)
    lines = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    session = next(m["session_id"] for m in lines if m.get("session_id"))
    assert "mcp__tenantry__facility_info" in offered
    assert len(results) == 3, results
    you = json.loads(results[0])["you"]
    assert (you["agent"], you["session"]) == ("claude-code", session)
    assert "squeue goes through Tenantry" in results[1]
    assert "Tenantry policy" in results[2] and "rm -rf ~" in results[2]

    assert sandbox.agent_sessions() == [("claude-code", session)]
    events = sandbox.tenantry_json("events", "--since", "3600", "--limit", "500")["events"]
    mine = [e for e in events if (e.get("principal") or "").endswith(f"/claude-code/{session}")]
    kinds = {e["type"] for e in mine}
    assert kinds, events
    assert any("session" in k for k in kinds), kinds

    sandbox.tenantry(
        "uninstall", "--agent", "claude-code", "--project", str(sandbox.project), "--yes"
    )
    after = sandbox.snapshot()
    assert after == before, sorted(set(after.items()) ^ set(before.items()))
