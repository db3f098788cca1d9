"""The hook records the session under the agent process; the agent's MCP server finds it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

DRIVER = """
import json, os, subprocess, sys
payload = json.dumps({"hook_event_name": "SessionStart", "session_id": "gem-42", "cwd": "/"})
# the hook runs through a shell, as agents run hooks
subprocess.run(["sh", "-c", f"{sys.executable} -m tenantry hook --agent gemini-cli"],
               input=payload, text=True, check=True, capture_output=True)
# the MCP server is a direct child and is told nothing about the session
out = subprocess.run([sys.executable, "-c",
    "import os; from tenantry.agents.agent_session import lookup;"
    "print(lookup(os.environ['TENANTRY_STATE_DIR'] + '/agent-sessions'))"],
    text=True, check=True, capture_output=True).stdout
print(out.strip())
"""


def test_mcp_server_learns_the_session_its_agent_told_the_hook(tmp_path: Path) -> None:
    agent = tmp_path / "fakeagent"  # a process whose name is not a shell's, like `node`
    agent.symlink_to(sys.executable)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(SRC),
        "TENANTRY_STATE_DIR": str(tmp_path / "state"),
        "TENANTRY_SOCKET": str(tmp_path / "no-daemon.sock"),
        "GEMINI_CLI": "1",
    }
    r = subprocess.run(
        [str(agent), "-c", DRIVER], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(("gemini-cli", "gem-42"))
    recorded = list((tmp_path / "state" / "agent-sessions").iterdir())
    assert len(recorded) == 1 and recorded[0].read_text() == "gemini-cli\tgem-42\n"
