"""Claude Code from npm with its ``http`` hooks: the daemon decides, no process per command."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from tests.agents.fake_model import FakeModel, Step
from tests.agents.harness import Sandbox, cli_path

pytestmark = [pytest.mark.agents, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _install(sandbox: Sandbox) -> int:
    port = _free_port()
    (sandbox.state / "config.toml").write_text(f'hook_http = "127.0.0.1:{port}"\n')
    sandbox.tenantry(
        "install", "--agent", "claude-code", "--project", str(sandbox.project), "--yes"
    )
    return port


def _counted_fallback(sandbox: Sandbox) -> Path:
    """Make each start of the fallback command hook write a line to the returned file."""
    settings = sandbox.project / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    started, wrapper = sandbox.base / "fallback-starts", sandbox.base / "fallback-hook"
    fallback = data["hooks"]["PreToolUse"][0]["hooks"][1:]
    (command,) = {h["command"] for h in fallback}  # one hook command behind every pattern
    wrapper.write_text(f"#!/bin/sh\necho fallback >> {started}\nexec {command}\n")
    wrapper.chmod(0o755)
    for h in fallback:
        h["command"] = str(wrapper)
    settings.write_text(json.dumps(data))
    started.write_text("")
    return started


def _claude(sandbox: Sandbox, fm: FakeModel, **env: str) -> None:
    r = sandbox.run(
        [cli_path("claude"), "-p", "check the facility", "--output-format", "stream-json",
         "--verbose", "--allowedTools", "Bash"],
        240, **{"ANTHROPIC_BASE_URL": fm.url, "ANTHROPIC_API_KEY": "sk-fake", **env},
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_http_hook_is_installed_and_decides_in_the_daemon(sandbox: Sandbox) -> None:
    port = _install(sandbox)
    settings = json.loads((sandbox.project / ".claude" / "settings.json").read_text())
    pre = settings["hooks"]["PreToolUse"][0]
    assert pre["hooks"][0] == {
        "type": "http",
        "url": f"http://127.0.0.1:{port}/v1/hook/claude-code",
        "timeout": 10,
    }
    assert all(h["type"] == "command" and h["if"] for h in pre["hooks"][1:])
    assert settings["hooks"]["SessionStart"][0]["hooks"][0]["type"] == "command"
    script = [
        Step("Bash", {"command": "squeue -u me", "description": "list my jobs"}),
        Step("Bash", {"command": "rm -rf ~", "description": "clean up"}),
        Step("Bash", {"command": "echo hello-$((6*7))", "description": "greet"}),
        Step(text="all done"),
    ]
    with FakeModel(script, trigger="Bash") as fm:
        _claude(sandbox, fm)
        results = list(fm.script.tool_results)
    assert len(results) == 3, results
    # squeue matches no fallback pattern: only the daemon's http answer can redirect it
    assert "squeue goes through Tenantry" in results[0]
    assert "Tenantry policy" in results[1] and "rm -rf ~" in results[1]
    assert "hello-42" in results[2]
    events = sandbox.tenantry_json("events", "--since", "3600", "--limit", "500")["events"]
    rules = {(e.get("data") or {}).get("rule") for e in events if e["type"] == "hook.decision"}
    assert "redirect.squeue" in rules, [e["type"] for e in events]


def test_without_a_daemon_the_dangerous_list_still_fails_closed(sandbox: Sandbox) -> None:
    _install(sandbox)
    (sandbox.project / "build-x").mkdir()
    script = [
        Step("Bash", {"command": "cd . && rm -rf build-x", "description": "clean"}),
        # a job array over the cap; its script is missing, so nothing is submitted if it
        # is not held, and the answer tells which happened
        Step("Bash", {"command": "sbatch -a 0-500 no-such-job.sh", "description": "sweep"}),
        Step("Bash", {"command": "echo still-$((6*7))", "description": "greet"}),
        Step(text="all done"),
    ]
    # the state directory is a file: no daemon can start, nothing answers the http hook
    broken = sandbox.base / "not-a-dir"
    broken.write_text("")
    with FakeModel(script, trigger="Bash") as fm:
        _claude(sandbox, fm, TENANTRY_STATE_DIR=str(broken), TENANTRY_SOCKET=str(broken) + "s")
        results = list(fm.script.tool_results)
    assert len(results) == 3, results
    assert "fails closed" in results[0], results[0]
    assert (sandbox.project / "build-x").is_dir()
    # held by the fallback command hook (only it answers with the daemon down): its
    # redirect comes first; sbatch itself never ran (it would say it cannot open the file)
    assert results[1].startswith("Tenantry: sbatch goes through Tenantry"), results[1]
    assert "still-42" in results[2]


# a plain submission whose words hold "-a" (a job name, an output path), not an array
SUBMIT = "sbatch -J hooked-analysis -o out-a1.txt job.sh"


def test_the_hook_submits_a_plain_sbatch_once(sandbox: Sandbox) -> None:
    """The http hook alone answers a plain ``sbatch`` (no fallback pattern matches it, so
    no hook process starts, also with a ``-a`` inside its words), and one job is
    submitted."""
    _install(sandbox)
    started = _counted_fallback(sandbox)
    (sandbox.project / "job.sh").write_text("#!/bin/sh\necho hi\n")
    (sandbox.project / "build-y").mkdir()
    script = [
        # any Tenantry command sends the session's environment (the job's)
        Step("Bash", {"command": "tenantry run -- true", "description": "warm up"}),
        Step("Bash", {"command": SUBMIT, "description": "submit"}),
        Step("Bash", {"command": "rm -r build-y", "description": "clean"}),
        Step(text="all done"),
    ]
    with FakeModel(script, trigger="Bash") as fm:
        r = sandbox.run(
            [cli_path("claude"), "-p", "check the facility", "--output-format", "stream-json",
             "--verbose", "--permission-mode", "bypassPermissions"],
            240, **{"ANTHROPIC_BASE_URL": fm.url, "ANTHROPIC_API_KEY": "sk-fake",
                    "IS_SANDBOX": "1"},  # bypassPermissions as root
        )  # fmt: skip
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        results = list(fm.script.tool_results)
    assert len(results) == 3, results
    assert results[1].startswith(f"Tenantry answered `{SUBMIT}` itself"), results
    jobs = sandbox.tenantry_json("jobs")["jobs"]
    assert [j["name"] for j in jobs] == ["hooked-analysis"], jobs
    assert results[1].endswith(f"\nSubmitted batch job {jobs[0]['backend_id']}"), results[1]
    events = sandbox.tenantry_json("events", "--since", "3600", "--limit", "500")["events"]
    assert [e["type"] for e in events].count("job.submitted") == 1, events
    # the one fallback hook process was the rm's; the plain sbatch started none
    assert started.read_text().splitlines() == ["fallback"], started.read_text()
