"""Through the real daemon and its MCP server: the measured holes, now closed.

Symlinks and copied binaries resolved from the command's cwd, ``--chdir`` for
job output paths, command-running options, a read-only session tier, and an
agent that can use the index (``find``/``grep``) at all.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import TextContent

from tenantry.core.errors import PolicyDenied
from tenantry.gateway.mcp import build_server

FACTS = json.dumps({"tiers": {"*/*/ro-*": "read-only"}})
SCANCEL = shutil.which("scancel") or "/usr/bin/scancel"


@pytest.fixture
def d(start_daemon: Any) -> Any:
    return start_daemon({"policy-facts.json": FACTS})


def text_of(result: Any) -> str:
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


def run(client: Any, argv: list[str], cwd: str) -> list[dict[str, Any]]:
    return list(client.stream("commands.run", {"argv": argv, "cwd": cwd}))


def denied(client: Any, op: str, params: dict[str, Any]) -> PolicyDenied:
    with pytest.raises(PolicyDenied) as info:
        if op == "commands.run":
            list(client.stream(op, params))
        else:
            client.call(op, params)
    return info.value


async def test_symlink_and_exec_options_through_mcp(
    d: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDECODE", "1")
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "sess-live")
    (tmp_path / "lnk").symlink_to(SCANCEL)
    marker = tmp_path / "ran"
    (tmp_path / "data").write_text("x\n")
    server = build_server(d.settings)
    async with Client(server) as client:
        bad = await client.call_tool(
            "run_command", {"argv": ["./lnk", "-u", "bob"], "cwd": str(tmp_path)}
        )
        assert bad.is_error and "another user" in text_of(bad)
        for command in (
            f"tar -cf x.tar --checkpoint=1 --checkpoint-action=exec='sudo touch {marker}' data",
            f"rsync -e 'sudo touch {marker}' data host:",
            f"ssh -o ProxyCommand='sudo touch {marker}' host",
            f"zip -T -TT 'sudo touch {marker}' x.zip data",
        ):
            bad = await client.call_tool(
                "run_command", {"argv": ["bash", "-c", command], "cwd": str(tmp_path)}
            )
            assert bad.is_error, command
            assert "privilege" in text_of(bad), text_of(bad)
        ok = await client.call_tool(
            "run_command", {"argv": ["tar", "-cf", "x.tar", "data"], "cwd": str(tmp_path)}
        )
        assert not ok.is_error
    assert not marker.exists()


def test_copied_scancel_and_chdir_output(d: Any, tmp_path: Path) -> None:
    agent = d.client(agent="codex", session="s1")
    if Path(SCANCEL).exists():
        shutil.copy2(SCANCEL, tmp_path / "tool")
        err = denied(agent, "commands.run", {"argv": ["./tool", "-u", "bob"], "cwd": str(tmp_path)})
        assert err.details.get("rule") == "agent-not-others-jobs" or "another user" in err.message
    home = os.path.expanduser("~")
    text = "#!/bin/sh\n#SBATCH --time=5\ntrue\n"
    params = {
        "script": str(tmp_path / "job.sh"),
        "script_text": text,
        "cwd": str(tmp_path),
        "extra": [f"--chdir={home}/.ssh"],
        "output": "authorized_keys",
    }
    err = denied(agent, "jobs.submit", params)
    assert "credential" in err.message


def test_read_only_tier(d: Any, tmp_path: Path) -> None:
    ro = d.client(agent="codex", session="ro-1")
    assert run(ro, ["ls", str(tmp_path)], str(tmp_path))[-1]["result"]["exit_code"] == 0
    err = denied(ro, "commands.run", {"argv": ["touch", "x"], "cwd": str(tmp_path)})
    assert "read-only" in err.message
    text = "#!/bin/sh\n#SBATCH --time=5\ntrue\n"
    job = {"script": str(tmp_path / "j.sh"), "script_text": text, "cwd": str(tmp_path)}
    assert "read-only" in denied(ro, "jobs.submit", job).message
    assert not (tmp_path / "x").exists()
    # the same user in a standard session may
    std = d.client(agent="codex", session="s2")
    assert run(std, ["touch", "x"], str(tmp_path))[-1]["result"]["exit_code"] == 0


def test_agent_can_use_the_index(d: Any, tmp_path: Path) -> None:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "train.py").write_text("learning_rate = 3e-4\n")
    agent = d.client(agent="claude-code", session="s1")
    agent.call("index.add", {"path": str(root), "wait": True})
    found = agent.call("index.find", {"path": str(root), "name": "*.py"})
    assert any(i["path"].endswith("train.py") for i in found["items"])
    hits = agent.call("index.grep", {"path": str(root), "pattern": "learning_rate"})
    assert hits["items"], hits
    env = {"TENANTRY_AGENT": "claude-code", "TENANTRY_SESSION": "s1"}
    cli = d.cli("grep", "learning_rate", str(root), env=env)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "train.py" in cli.stdout
