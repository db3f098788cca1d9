"""Gemini CLI: ``settings.json`` (``mcpServers`` and ``hooks``) and ``GEMINI.md``.

- Settings: ``DIR/.gemini/settings.json``, ``~/.gemini/settings.json`` or the
  system file ``/etc/gemini-cli/settings.json``.
- MCP: ``mcpServers.tenantry = {command, args, timeout}`` (timeout in ms).
- Hooks: ``hooks.BeforeTool`` with matcher ``run_shell_command``, and
  ``SessionStart``/``SessionEnd``; handlers ``{type: command, name, command,
  timeout}`` (ms). A BeforeTool hook answers ``{"decision": "deny", "reason"}``.
- Rules: the site-rules block in ``GEMINI.md`` (project root or ``~/.gemini``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tenantry.agents import files
from tenantry.agents.products.common import (
    Target,
    hook_command,
    set_grouped_hooks,
    set_server,
)
from tenantry.agents.rules import SITE_RULES

AGENT = "gemini-cli"


def _paths(t: Target) -> tuple[Path, Path | None]:
    if t.scope == "project":
        return t.project / ".gemini" / "settings.json", t.project / "GEMINI.md"
    if t.scope == "user":
        return t.home / ".gemini" / "settings.json", t.home / ".gemini" / "GEMINI.md"
    return t.system("/etc/gemini-cli/settings.json"), None


def server_entry(t: Target) -> dict[str, Any]:
    argv = t.argv0
    return {"command": argv[0], "args": [*argv[1:], "mcp"], "timeout": 600000}


def hook_groups(t: Target) -> dict[str, dict[str, Any]]:
    handler = {
        "type": "command",
        "name": "tenantry",
        "command": hook_command(t, AGENT),
        "timeout": 10000,
        "description": "Tenantry: HPC policy and redirection of scheduler/search commands",
    }
    return {
        "BeforeTool": {"matcher": "run_shell_command", "hooks": [handler]},
        "SessionStart": {"hooks": [handler]},
        "SessionEnd": {"hooks": [handler]},
    }


def _edit(data: dict[str, Any], t: Target, on: bool) -> None:
    set_server(data, "mcpServers", server_entry(t) if on else None)
    set_grouped_hooks(data, hook_groups(t) if on else None)


def install(t: Target) -> list[files.Change]:
    return _apply(t, True)


def uninstall(t: Target) -> list[files.Change]:
    return _apply(t, False)


def _apply(t: Target, on: bool) -> list[files.Change]:
    """The settings file edited (hooks and MCP server in or out), and the site rules."""
    settings, rules = _paths(t)
    out = [files.edit_json(settings, lambda d: _edit(d, t, on))]
    if rules is not None:
        out.append(files.edit_block(rules, SITE_RULES if on else None))
    return out
