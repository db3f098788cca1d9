"""Claude Code from npm, started through `tenantry agent`, driven by a fake model.

Its MCP calls and hook decisions are attributed to the sandboxed session (the
session id is the sandbox's, whatever Claude Code says), and the hook still
stops `rm -rf ~` inside the sandbox. Uses the fake model and CLI location of
tests/agents (scripts/install-agent-clis).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

fake_model: Any = pytest.importorskip(
    "tests.agents.fake_model", reason="needs tests/agents/fake_model.py (real agent CLI tests)"
)
AGENTS_BIN = Path(os.environ.get("TENANTRY_AGENTS_DIR", "/opt/tenantry-agents")) / "node_modules"
CLAUDE = AGENTS_BIN / ".bin" / "claude"
pytestmark = [pytest.mark.slow, pytest.mark.agents]


def test_claude_code_in_a_sandboxed_session(tmp_path: Path) -> None:
    from tenantry.core.errors import SandboxUnavailable
    from tenantry.safety.sandbox.bwrap import find_bwrap

    if not CLAUDE.exists():
        if os.environ.get("TENANTRY_REQUIRE_AGENTS") == "1":
            pytest.fail(f"{CLAUDE} is required (TENANTRY_REQUIRE_AGENTS=1)")
        pytest.skip(f"{CLAUDE} is not installed; run scripts/install-agent-clis")
    try:
        find_bwrap()
    except SandboxUnavailable as err:
        pytest.skip(err.message)
    home, proj, state = tmp_path / "home", tmp_path / "proj", tmp_path / "state"
    for d in (home, proj):
        d.mkdir()
    env = {
        "HOME": str(home),
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8",
        "TENANTRY_STATE_DIR": str(state),
        "TENANTRY_SOCKET": str(tmp_path / "sock"),
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "MCP_TIMEOUT": "60000",  # the sandboxed MCP server's start on a loaded machine
        "NO_COLOR": "1",
    }

    def tenantry(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tenantry", *args],
            cwd=proj, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip

    r = tenantry("install", "--agent", "claude-code", "--project", str(proj), "--yes")
    assert r.returncode == 0, r.stderr
    steps = [
        fake_model.Step("facility_info", {}),
        fake_model.Step("Bash", {"command": "rm -rf ~", "description": "clean up"}),
        fake_model.Step(text="all done"),
    ]
    try:
        with fake_model.FakeModel(steps) as fm:
            run = subprocess.run(
                [
                    sys.executable, "-m", "tenantry", "agent", "--", str(CLAUDE), "-p", "go",
                    "--output-format", "stream-json", "--verbose",
                    "--allowedTools", "mcp__tenantry__facility_info,Bash",
                    "--mcp-config", str(proj / ".mcp.json"),
                ],
                cwd=proj, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL,
                env=env | {"ANTHROPIC_BASE_URL": fm.url, "ANTHROPIC_API_KEY": "sk-fake"},
            )  # fmt: skip
            results = list(fm.script.tool_results)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        sid = run.stderr.split("agent session ", 1)[1].split()[0]
        assert sid.startswith("sb-")
        assert len(results) == 2, (results, run.stdout[-3000:])
        you = json.loads(results[0])["you"]
        assert (you["agent"], you["session"]) == ("claude-code", sid)
        assert "rm -rf ~" in results[1] and "Tenantry" in results[1]
        rows = json.loads(tenantry("sessions", "--json").stdout)["sessions"]
        agents = {(s["agent"], s["session"], s["kind"]) for s in rows if s["agent"] != "human"}
        assert agents == {("claude-code", sid, "sandboxed")}, rows
    finally:
        lock = state / "daemon.lock"
        if lock.exists() and lock.read_text().strip().isdigit():
            os.kill(int(lock.read_text()), signal.SIGTERM)
