"""Cursor: ``mcp.json``, ``hooks.json`` (version 1) and a project rule.

- MCP: ``DIR/.cursor/mcp.json`` or ``~/.cursor/mcp.json``,
  ``{"mcpServers": {name: {command, args}}}``. Cursor has no system MCP file.
- Hooks: ``DIR/.cursor/hooks.json``, ``~/.cursor/hooks.json`` or the
  enterprise ``/etc/cursor/hooks.json``: ``{"version": 1, "hooks": {event:
  [{command, timeout}]}}`` for ``beforeShellExecution``, ``sessionStart`` and
  ``sessionEnd``. Answers are ``{"permission": allow|deny|ask, "user_message",
  "agent_message"}``.
- Rules: ``DIR/.cursor/rules/tenantry.mdc`` (always applied), a file Tenantry owns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tenantry.agents import files
from tenantry.agents.products.common import Target, hook_command, is_ours, set_server
from tenantry.agents.rules import SITE_RULES

AGENT = "cursor"
EVENTS = ("beforeShellExecution", "sessionStart", "sessionEnd")


def _dir(t: Target) -> Path:
    if t.scope == "project":
        return t.project / ".cursor"
    if t.scope == "user":
        return t.home / ".cursor"
    return t.system("/etc/cursor")


def server_entry(t: Target) -> dict[str, Any]:
    argv = t.argv0
    return {"command": argv[0], "args": [*argv[1:], "mcp"]}


def _hooks(data: dict[str, Any], t: Target, on: bool) -> None:
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        hooks = {}
    for event in list(hooks):
        if isinstance(hooks[event], list):
            hooks[event] = [h for h in hooks[event] if not is_ours(h)]
            if not hooks[event]:
                del hooks[event]
    if on:
        for event in EVENTS:
            hooks.setdefault(event, []).append({"command": hook_command(t, AGENT), "timeout": 10})
    if hooks:
        data["hooks"] = hooks
        if "version" not in data:
            rest = dict(data)
            data.clear()
            data.update({"version": 1, **rest})
    else:
        data.pop("hooks", None)
        if set(data) <= {"version"}:
            data.clear()


RULE = "---\ndescription: HPC site rules (Tenantry)\nalwaysApply: true\n---\n\n" + SITE_RULES


def install(t: Target) -> list[files.Change]:
    d = _dir(t)
    out = [files.edit_json(d / "hooks.json", lambda data: _hooks(data, t, True))]
    if t.scope != "system":
        out.insert(
            0,
            files.edit_json(
                d / "mcp.json", lambda data: set_server(data, "mcpServers", server_entry(t))
            ),
        )
    if t.scope == "project":
        out.append(files.whole_file(d / "rules" / "tenantry.mdc", RULE))
    return out


def uninstall(t: Target) -> list[files.Change]:
    d = _dir(t)
    out = [files.edit_json(d / "hooks.json", lambda data: _hooks(data, t, False))]
    if t.scope != "system":
        out.insert(
            0, files.edit_json(d / "mcp.json", lambda data: set_server(data, "mcpServers", None))
        )
    if t.scope == "project":
        out.append(files.whole_file(d / "rules" / "tenantry.mdc", None))
    return out
