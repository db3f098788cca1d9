"""OpenCode: ``opencode.json`` ``mcp`` section, a plugin for the hook, AGENTS.md.

- MCP: ``mcp.tenantry = {type: "local", command: [...], enabled: true}`` in
  ``DIR/opencode.json`` or ``~/.config/opencode/opencode.json``.
- Hook: OpenCode has no command hooks; its plugins (JS modules loaded from
  ``.opencode/plugins/`` or ``~/.config/opencode/plugins/``) get
  ``tool.execute.before`` and session events. Tenantry writes a small plugin
  that hands bash calls and session events to ``tenantry hook --agent
  opencode`` and throws (blocking the call) on a deny.
- Rules: the site-rules block in ``AGENTS.md``.
- OpenCode documents no system-wide config file, so ``--system`` is refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tenantry.agents import files
from tenantry.agents.products.common import Target, hook_argv, set_server
from tenantry.agents.rules import SITE_RULES
from tenantry.core.errors import UsageError

AGENT = "opencode"

PLUGIN = """\
// Tenantry plugin for OpenCode. Written by `tenantry install`; `tenantry uninstall` removes it.
// Hands bash tool calls and session events to `tenantry hook --agent opencode` and
// blocks a call the hook denies, with the hook's message for the model.
const HOOK = __HOOK__;

async function verdict(payload) {
  const proc = Bun.spawn(HOOK, {
    stdin: new Blob([JSON.stringify(payload)]),
    stdout: "pipe",
    stderr: "ignore",
  });
  const text = await new Response(proc.stdout).text();
  await proc.exited;
  try {
    return JSON.parse(text);
  } catch {
    return {};
  }
}

export const Tenantry = async () => ({
  "tool.execute.before": async (input, output) => {
    if (input.tool !== "bash") return;
    const v = await verdict({
      hook_event_name: "tool.execute.before",
      tool: input.tool,
      session_id: input.sessionID,
      args: output.args,
    });
    if (v.decision === "deny" || v.decision === "ask") {
      throw new Error(v.message || "denied by Tenantry");
    }
  },
  event: async ({ event }) => {
    if (event.type === "session.created" || event.type === "session.deleted") {
      await verdict({ hook_event_name: event.type, session_id: event.properties?.info?.id ?? "" });
    }
  },
});
"""


def _dir(t: Target) -> Path:
    if t.scope == "project":
        return t.project
    if t.scope == "user":
        return t.home / ".config" / "opencode"
    raise UsageError(
        "OpenCode documents no system-wide config file",
        hint="install per user (--user) or per project (--project DIR)",
    )


def _plugin_path(t: Target) -> Path:
    d = _dir(t)
    return (
        d / ".opencode" / "plugins" / "tenantry.js"
        if t.scope == "project"
        else d / "plugins" / "tenantry.js"
    )


def server_entry(t: Target) -> dict[str, Any]:
    return {"type": "local", "command": [*t.argv0, "mcp"], "enabled": True}


def plugin_text(t: Target) -> str:
    return PLUGIN.replace("__HOOK__", json.dumps(hook_argv(t, AGENT)))


def _config(data: dict[str, Any], t: Target, on: bool) -> None:
    if on:
        data.setdefault("$schema", "https://opencode.ai/config.json")
    set_server(data, "mcp", server_entry(t) if on else None)


def install(t: Target) -> list[files.Change]:
    d = _dir(t)
    return [
        files.edit_json(d / "opencode.json", lambda data: _config(data, t, True)),
        files.whole_file(_plugin_path(t), plugin_text(t)),
        files.edit_block(d / "AGENTS.md", SITE_RULES),
    ]


def uninstall(t: Target) -> list[files.Change]:
    d = _dir(t)
    return [
        files.edit_json(d / "opencode.json", lambda data: _config(data, t, False)),
        files.whole_file(_plugin_path(t), None),
        files.edit_block(d / "AGENTS.md", None),
    ]
