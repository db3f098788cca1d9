"""Installers write each agent's documented format, idempotently, with backups."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tenantry.agents import files, installer
from tenantry.agents.files import BEGIN, END
from tenantry.agents.products.common import Target
from tenantry.core import errors

from ..conftest import run_tenantry

SRC = Path(__file__).resolve().parents[2] / "src"
EXE = ("/opt/tenantry/bin/tenantry",)
HOOK = "/opt/tenantry/bin/tenantry hook --agent "


@pytest.fixture
def tgt(tmp_path: Path) -> Any:
    def make(scope: str) -> Target:
        (tmp_path / "home").mkdir(exist_ok=True)
        (tmp_path / "proj").mkdir(exist_ok=True)
        return Target(scope, tmp_path / "home", tmp_path / "proj", tmp_path / "root", EXE)

    return make


def records(t: Target) -> files.Records:
    return files.Records(t.home.parent / "state" / "install")


def install(agent: str, t: Target) -> None:
    plan = installer.plan(agent, t)
    assert plan.pending, "a first install changes files"
    files.apply(plan.pending, records(t), install=True)
    again = installer.plan(agent, t)
    assert again.pending == [], f"not idempotent: {again.diff()}"


def uninstall(agent: str, t: Target) -> None:
    plan = installer.plan(agent, t, remove=True)
    files.apply(records(t).restore(plan.pending), records(t), install=False)
    assert installer.plan(agent, t, remove=True).pending == []


def js(path: Path) -> Any:
    return json.loads(path.read_text())


def ours(groups: list[dict[str, Any]], agent: str) -> list[dict[str, Any]]:
    return [g for g in groups if any(h["command"] == HOOK + agent for h in g["hooks"])]


def rules_block(path: Path) -> str:
    text = path.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    return text[text.index(BEGIN) : text.index(END)]


def in_scope(t: Any, scope: str, project: str, user: str, system: str) -> Path:
    """The path an install of ``scope`` writes: under the project, the home or the root."""
    paths: dict[str, Path] = {
        "project": t.project / project,
        "user": t.home / user,
        "system": t.root / system,
    }
    return paths[scope]


# --- Claude Code -----------------------------------------------------------------


@pytest.mark.parametrize("scope", ["project", "user", "system"])
def test_claude_code(tgt: Any, scope: str) -> None:
    t = tgt(scope)
    mcp, settings, memory = {
        "project": (
            t.project / ".mcp.json",
            t.project / ".claude/settings.json",
            t.project / "CLAUDE.md",
        ),
        "user": (
            t.home / ".claude.json",
            t.home / ".claude/settings.json",
            t.home / ".claude/CLAUDE.md",
        ),
        "system": (
            t.root / "etc/claude-code/managed-mcp.json",
            t.root / "etc/claude-code/managed-settings.json",
            t.root / "etc/claude-code/CLAUDE.md",
        ),
    }[scope]
    # a user's own content that must survive
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(
        json.dumps(
            {
                "model": "opus",
                "hooks": {
                    "PreToolUse": [
                        {"matcher": "Write", "hooks": [{"type": "command", "command": "fmt.sh"}]}
                    ]
                },
            }
        )
    )
    install("claude-code", t)
    server = js(mcp)["mcpServers"]["tenantry"]
    assert server == {"type": "stdio", "command": EXE[0], "args": ["mcp"], "env": {}}
    s = js(settings)
    assert s["model"] == "opus"
    pre = s["hooks"]["PreToolUse"]
    assert pre[0]["matcher"] == "Write"  # the user's group first and intact
    mine = ours(pre, "claude-code")
    assert len(mine) == 1 and mine[0]["matcher"] == "Bash"
    assert mine[0]["hooks"][0]["type"] == "command" and isinstance(
        mine[0]["hooks"][0]["timeout"], int
    )
    for event in ("SessionStart", "SessionEnd"):
        assert len(ours(s["hooks"][event], "claude-code")) == 1
    assert "tenantry jobs" in rules_block(memory)
    assert not list(settings.parent.glob("*backup*")), "backups stay out of the project"
    backups = list(records(t).dir.glob(f"backups/*/*{settings.name}"))
    assert len(backups) == 1 and json.loads(backups[0].read_text())["model"] == "opus"
    uninstall("claude-code", t)
    assert not mcp.exists() and not memory.exists()
    assert js(settings) == {
        "model": "opus",
        "hooks": {
            "PreToolUse": [
                {"matcher": "Write", "hooks": [{"type": "command", "command": "fmt.sh"}]}
            ]
        },
    }


def test_claude_code_http_hooks_with_a_command_fallback(tgt: Any) -> None:
    """With hook_http the tool hooks are http (no process per command); the dangerous
    list keeps a command hook, and switching back and forth leaves one set of ours."""
    import dataclasses

    from tenantry.agents import steer
    from tenantry.agents.products.claude_code import FALLBACK_IF, fallback_runs

    plain = tgt("user")
    t = dataclasses.replace(plain, hook_http="127.0.0.1:47001")
    settings = t.home / ".claude/settings.json"
    install("claude-code", plain)
    install("claude-code", t)
    s = js(settings)
    pre = s["hooks"]["PreToolUse"]
    assert len(pre) == 1 and pre[0]["matcher"] == "Bash"
    http, *fallback = pre[0]["hooks"]
    assert http == {"type": "http", "url": "http://127.0.0.1:47001/v1/hook/claude-code",
                    "timeout": 10}  # fmt: skip
    assert [h["if"] for h in fallback] == list(FALLBACK_IF)
    assert {h["command"] for h in fallback} == {HOOK + "claude-code"}
    assert s["hooks"]["PostToolUseFailure"][0]["hooks"] == [http]
    assert s["hooks"]["SessionStart"][0]["hooks"][0]["command"] == HOOK + "claude-code"
    # every command the built-in dangerous list refuses runs the fallback, alone or
    # inside a chain; a plain sbatch (the daemon's hook answers it) does not
    for command in ("rm -rf x", "scancel 1", "kill -1", "dd of=/dev/sda", "mkfs.ext4 /dev/x",
                    "chmod -R 777 .", "pkill x", "shred f", "wipefs /dev/x",
                    "sbatch -a 0-500 job.sh", "sbatch --array=1-1000%10 job.sh",
                    "sbatch -a1-200 job.sh", "cd x && sbatch --array 0-999 job.sh",
                    "sbatch --account=chem42 -a 0-500 job.sh",
                    "sbatch -J sweep --array=0-499 job.sh",
                    "for i in $(seq 50); do sbatch job.sh; done",
                    "seq 50 | xargs -n1 sbatch job.sh", "cd . && rm -rf build"):  # fmt: skip
        assert steer.dangerous(command), command
        assert fallback_runs(command), command
    for command in ("sbatch job.sh", "sbatch --parsable -J x -t 1 --mem 64M job.sh",
                    # a `-a` inside a word is no array option
                    "sbatch --account=chem42 job.sh", "sbatch -A chem42 --mail-type=END job.sh",
                    "sbatch -p gpu-a100 job.sh", "sbatch -J my-analysis job.sh",
                    "sbatch -o /home/tt-day-a05/out.txt job.sh",
                    "squeue --me", "sacct -X", "ls -la", "git status"):  # fmt: skip
        assert not steer.dangerous(command), command
        assert not fallback_runs(command), command
    uninstall("claude-code", t)
    assert not settings.exists() or "hooks" not in js(settings)


def test_claude_code_install_again_replaces_an_earlier_installs_patterns(tgt: Any) -> None:
    """An install written with an earlier ``FALLBACK_IF`` (``Bash(sbatch *-a*)``, which
    also matched ``--account=...``) is replaced as a whole by installing again."""
    import dataclasses

    from tenantry.agents.products.claude_code import FALLBACK_IF

    t = dataclasses.replace(tgt("user"), hook_http="127.0.0.1:47001")
    install("claude-code", t)
    settings = t.home / ".claude/settings.json"
    s = js(settings)
    http, *fallback = s["hooks"]["PreToolUse"][0]["hooks"]
    old = {**fallback[0], "if": "Bash(sbatch *-a*)"}
    others = [h for h in fallback if not h["if"].startswith("Bash(sbatch")]
    s["hooks"]["PreToolUse"][0]["hooks"] = [http, *others, old]
    settings.write_text(json.dumps(s))
    install("claude-code", t)
    pre = js(settings)["hooks"]["PreToolUse"]
    assert len(pre) == 1
    assert [h.get("if") for h in pre[0]["hooks"][1:]] == list(FALLBACK_IF)


def test_claude_user_keeps_the_big_state_file(tgt: Any) -> None:
    t = tgt("user")
    state = {
        "numStartups": 12,
        "projects": {"/x": {"mcpServers": {}}},
        "mcpServers": {"other": {"command": "o"}},
    }
    (t.home / ".claude.json").write_text(json.dumps(state))
    install("claude-code", t)
    data = js(t.home / ".claude.json")
    assert data["numStartups"] == 12 and set(data["mcpServers"]) == {"other", "tenantry"}
    uninstall("claude-code", t)
    assert js(t.home / ".claude.json") == state


# --- Codex -----------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["project", "user", "system"])
def test_codex(tgt: Any, scope: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setenv("TENANTRY_STATE_DIR", "/srv/state")
    monkeypatch.setenv("TENANTRY_SOCKET", "/run/t/sock")
    t = tgt(scope)
    d = in_scope(t, scope, ".codex", ".codex", "etc/codex")
    d.mkdir(parents=True, exist_ok=True)
    user_toml = "\n".join(
        [
            "# my settings",
            'model = "gpt-5.5-codex"  # keep',
            "",
            "[mcp_servers.docs]",
            'command = "docs-mcp"',
            "",
        ]
    )
    (d / "config.toml").write_text(user_toml)
    install("codex", t)
    text = (d / "config.toml").read_text()
    assert text.startswith(user_toml)  # comments and layout kept
    cfg = tomllib.loads(text)
    server = cfg["mcp_servers"]["tenantry"]
    assert (server["command"], server["args"]) == (EXE[0], ["mcp"])
    # Codex passes MCP servers almost no environment: forward what finds the daemon,
    # and pin it where the install knows it (a user's own config)
    assert {"XDG_RUNTIME_DIR", "TENANTRY_SOCKET"} <= set(server["env_vars"])
    pinned = {"TENANTRY_SOCKET": "/run/t/sock", "TENANTRY_STATE_DIR": "/srv/state"}
    assert server["env"] == {"TENANTRY_AGENT": "codex", **(pinned if scope == "user" else {})}
    # a loaded login node may take longer than Codex's 10 s default to start the server
    assert server["startup_timeout_sec"] >= 30
    # Codex waits only for required servers: an optional one still listing its tools
    # when the first turn starts is left out of it
    assert server["required"] is True
    assert cfg["mcp_servers"]["docs"] == {"command": "docs-mcp"}
    hooks = js(d / "hooks.json")["hooks"]
    assert ours(hooks["PreToolUse"], "codex")[0]["matcher"] == "Bash"
    assert ours(hooks["SessionStart"], "codex")
    assert ours(hooks["SessionEnd"], "codex")[0]["hooks"][0]["timeout"] <= 3
    if scope == "system":
        req = tomllib.loads((d / "requirements.toml").read_text())
        assert req["mcp_servers"]["tenantry"]["identity"] == {"command": EXE[0]}
    else:
        agents_md = t.project / "AGENTS.md" if scope == "project" else d / "AGENTS.md"
        assert "tenantry submit" in rules_block(agents_md)
    uninstall("codex", t)
    assert (d / "config.toml").read_text() == user_toml
    assert not (d / "hooks.json").exists() and not (d / "requirements.toml").exists()


# --- Gemini CLI ------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["project", "user", "system"])
def test_gemini_cli(tgt: Any, scope: str) -> None:
    t = tgt(scope)
    settings = in_scope(
        t, scope, ".gemini/settings.json", ".gemini/settings.json", "etc/gemini-cli/settings.json"
    )
    install("gemini-cli", t)
    s = js(settings)
    server = s["mcpServers"]["tenantry"]
    assert (
        server["command"] == EXE[0]
        and server["args"] == ["mcp"]
        and isinstance(server["timeout"], int)
    )
    before = ours(s["hooks"]["BeforeTool"], "gemini-cli")
    assert before[0]["matcher"] == "run_shell_command"
    handler = before[0]["hooks"][0]
    assert handler["type"] == "command" and handler["timeout"] >= 1000  # milliseconds
    assert ours(s["hooks"]["SessionStart"], "gemini-cli") and ours(
        s["hooks"]["SessionEnd"], "gemini-cli"
    )
    if scope != "system":
        md = t.project / "GEMINI.md" if scope == "project" else t.home / ".gemini/GEMINI.md"
        assert "tenantry find" in rules_block(md)
    uninstall("gemini-cli", t)
    assert not settings.exists()


# --- OpenCode --------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["project", "user"])
def test_opencode(tgt: Any, scope: str) -> None:
    t = tgt(scope)
    base = t.project if scope == "project" else t.home / ".config/opencode"
    base.mkdir(parents=True, exist_ok=True)
    (base / "opencode.json").write_text(
        json.dumps({"$schema": "https://opencode.ai/config.json", "model": "x/y"})
    )
    install("opencode", t)
    cfg = js(base / "opencode.json")
    assert cfg["mcp"]["tenantry"] == {"type": "local", "command": [EXE[0], "mcp"], "enabled": True}
    assert cfg["model"] == "x/y"
    plugin = base / (
        ".opencode/plugins/tenantry.js" if scope == "project" else "plugins/tenantry.js"
    )
    text = plugin.read_text()
    assert (
        '"tool.execute.before"' in text
        and json.dumps([EXE[0], "hook", "--agent", "opencode"]) in text
    )
    assert "tenantry run" in rules_block(base / "AGENTS.md")
    uninstall("opencode", t)
    assert js(base / "opencode.json") == {
        "$schema": "https://opencode.ai/config.json",
        "model": "x/y",
    }
    assert not plugin.exists()


def test_opencode_refuses_system(tgt: Any) -> None:
    with pytest.raises(errors.UsageError):
        installer.plan("opencode", tgt("system"))


# --- Cursor ----------------------------------------------------------------------


@pytest.mark.parametrize("scope", ["project", "user", "system"])
def test_cursor(tgt: Any, scope: str) -> None:
    t = tgt(scope)
    d = in_scope(t, scope, ".cursor", ".cursor", "etc/cursor")
    d.mkdir(parents=True, exist_ok=True)
    (d / "hooks.json").write_text(
        json.dumps({"version": 1, "hooks": {"afterFileEdit": [{"command": "./fmt.sh"}]}})
    )
    install("cursor", t)
    h = js(d / "hooks.json")
    assert h["version"] == 1 and h["hooks"]["afterFileEdit"] == [{"command": "./fmt.sh"}]
    for event in ("beforeShellExecution", "sessionStart", "sessionEnd"):
        assert [e["command"] for e in h["hooks"][event]] == [HOOK + "cursor"]
    if scope != "system":
        assert js(d / "mcp.json")["mcpServers"]["tenantry"] == {"command": EXE[0], "args": ["mcp"]}
    else:
        assert not (d / "mcp.json").exists()
    if scope == "project":
        rule = (d / "rules/tenantry.mdc").read_text()
        assert rule.startswith("---\n") and "alwaysApply: true" in rule
    uninstall("cursor", t)
    assert js(d / "hooks.json") == {
        "version": 1,
        "hooks": {"afterFileEdit": [{"command": "./fmt.sh"}]},
    }
    assert not (d / "rules/tenantry.mdc").exists()


# --- shared mechanics ---------------------------------------------------------------


def test_rules_block_is_appended_and_removed_exactly(tmp_path: Path) -> None:
    md = tmp_path / "AGENTS.md"
    original = "# Project\n\nUse tabs.\n"
    md.write_text(original)
    rec = files.Records(tmp_path / "rec")
    files.apply([files.edit_block(md, "rule one")], rec, install=True)
    assert md.read_text().startswith(original) and "rule one" in md.read_text()
    assert files.edit_block(md, "rule one").changed is False  # installing twice is a no-op
    files.apply([files.edit_block(md, "rule two")], rec, install=True)  # replaced in place
    assert md.read_text().count(BEGIN) == 1 and "rule one" not in md.read_text()
    files.apply([files.edit_block(md, None)], rec, install=False)
    assert md.read_text() == original


@pytest.mark.parametrize("original", ["", "x", "x\n", "x\n\n", "a\r\nb\r\n", "\n"])
def test_rules_block_round_trips_byte_for_byte(tmp_path: Path, original: str) -> None:
    md = tmp_path / "CLAUDE.md"
    md.write_bytes(original.encode())
    rec = files.Records(tmp_path / "rec")
    files.apply([files.edit_block(md, "rule")], rec, install=True)
    again = files.edit_block(md, "rule")
    assert not again.changed, again.diff()
    # without the record (the semantic path) and with it, the bytes come back
    assert files.edit_block(md, None).after in (original, None if not original.strip() else "")
    files.apply(rec.restore([files.edit_block(md, None)]), rec, install=False)
    assert md.read_bytes() == original.encode()


def test_uninstall_gives_back_json_bytes_and_keeps_files_it_did_not_create(
    tmp_path: Path,
) -> None:
    rec = files.Records(tmp_path / "rec")
    compact = tmp_path / "settings.json"
    compact.write_text('{"model":"opus",  "x": [1,2]}')
    schema_only = tmp_path / "opencode.json"
    schema_only.write_text('{"$schema": "https://opencode.ai/config.json"}\n')
    empty = tmp_path / "mcp.json"
    empty.write_text("")
    paths = [compact, schema_only, empty]
    before = {p: p.read_bytes() for p in paths}
    files.apply(
        [files.edit_json(p, lambda d: d.update(tenantry=1)) for p in paths], rec, install=True
    )
    assert all(p.read_bytes() != before[p] for p in paths)
    removal = [files.edit_json(p, lambda d: d.pop("tenantry")) for p in paths]
    files.apply(rec.restore(removal), rec, install=False)
    assert {p: p.read_bytes() for p in paths} == before
    created = tmp_path / "new.json"
    files.apply([files.edit_json(created, lambda d: d.update(tenantry=1))], rec, install=True)
    files.apply(
        rec.restore([files.edit_json(created, lambda d: d.pop("tenantry"))]), rec, install=False
    )
    assert not created.exists()


def test_uninstall_after_a_user_edit_removes_only_our_entries(tmp_path: Path) -> None:
    rec = files.Records(tmp_path / "rec")
    p = tmp_path / "settings.json"
    p.write_text('{"a": 1}')
    files.apply([files.edit_json(p, lambda d: d.update(tenantry=1))], rec, install=True)
    p.write_text(json.dumps({**json.loads(p.read_text()), "b": 2}))
    files.apply(rec.restore([files.edit_json(p, lambda d: d.pop("tenantry"))]), rec, install=False)
    assert json.loads(p.read_text()) == {"a": 1, "b": 2}


def test_invalid_json_is_left_alone(tmp_path: Path) -> None:
    p = tmp_path / ".mcp.json"
    p.write_text("{ not json")
    with pytest.raises(errors.UsageError, match="not valid JSON"):
        files.edit_json(p, lambda d: d.update(x=1))
    assert p.read_text() == "{ not json"


def test_mode_is_kept(tmp_path: Path) -> None:
    p = tmp_path / "settings.json"
    p.write_text("{}")
    os.chmod(p, 0o600)
    files.apply(
        [files.edit_json(p, lambda d: d.update(a=1))], files.Records(tmp_path / "r"), install=True
    )
    assert p.stat().st_mode & 0o777 == 0o600


def run_cli(*args: str, home: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HOME": str(home),
        "PYTHONPATH": str(SRC),
        "TENANTRY_STATE_DIR": str(home.parent / "state"),
    }
    return run_tenantry(*args, env=env, cwd=cwd)


def test_cli_dry_run_diff_then_apply_then_noop(tmp_path: Path) -> None:
    home, proj = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    dry = run_cli("install", "--agent", "gemini-cli", "--user", "--dry-run", home=home, cwd=proj)
    assert dry.returncode == 0, dry.stderr
    assert f"+++ b{home}/.gemini/settings.json" in dry.stdout and '+    "tenantry": {' in dry.stdout
    assert not (home / ".gemini").exists()
    refused = run_cli("install", "--agent", "gemini-cli", "--user", home=home, cwd=proj)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    done = run_cli(
        "install", "--agent", "gemini-cli", "--user", "--yes", "--json", home=home, cwd=proj
    )
    report = json.loads(done.stdout)
    assert report["applied"] and {c["action"] for c in report["changes"]} == {"create"}
    again = run_cli(
        "install", "--agent", "gemini-cli", "--user", "--yes", "--json", home=home, cwd=proj
    )
    assert json.loads(again.stdout)["changes"] == []
    gone = run_cli("uninstall", "--agent", "gemini-cli", "--user", "--yes", home=home, cwd=proj)
    assert gone.returncode == 0 and not (home / ".gemini/settings.json").exists()


def test_cli_all_agents(tmp_path: Path) -> None:
    home, proj = tmp_path / "home", tmp_path / "proj"
    home.mkdir()
    proj.mkdir()
    done = run_cli(
        "install", "--agent", "all", "--project", str(proj), "--yes", "--json", home=home, cwd=proj
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert {c["agent"] for c in report["changes"]} == {
        "claude-code",
        "codex",
        "gemini-cli",
        "opencode",
        "cursor",
    }
    paths = [c["path"] for c in report["changes"]]
    assert len(paths) == len(set(paths))  # AGENTS.md is planned once for Codex and OpenCode
    assert (proj / "AGENTS.md").read_text().count(BEGIN) == 1
    again = run_cli(
        "install", "--agent", "all", "--project", str(proj), "--yes", "--json", home=home, cwd=proj
    )
    assert json.loads(again.stdout)["changes"] == []
    system = run_cli(
        "install",
        "--agent",
        "all",
        "--system",
        "--root",
        str(tmp_path / "root"),
        "--dry-run",
        "--json",
        home=home,
        cwd=proj,
    )
    assert system.returncode == 0 and any(
        "opencode" in s for s in json.loads(system.stdout)["skipped"]
    )
    gone = run_cli(
        "uninstall", "--agent", "all", "--project", str(proj), "--yes", home=home, cwd=proj
    )
    assert gone.returncode == 0, gone.stderr
    assert not (proj / "AGENTS.md").exists() and not (proj / ".mcp.json").exists()
    left = sorted(p.name for p in proj.iterdir())
    assert left == []  # directories that only held Tenantry's files are gone too
