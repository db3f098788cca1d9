"""Codex: ``[mcp_servers.tenantry]`` in config.toml, hooks.json, AGENTS.md.

- MCP: ``[mcp_servers.tenantry]`` with ``command`` and ``args`` in
  ``DIR/.codex/config.toml`` (trusted projects), ``$CODEX_HOME/config.toml``
  (default ``~/.codex``) or ``/etc/codex/config.toml``. With ``--system`` the
  admin ``/etc/codex/requirements.toml`` also gets
  ``[mcp_servers.tenantry.identity] command = ...``: once requirements list
  MCP servers, Codex enables only those whose name and identity match.
- Hooks: ``hooks.json`` beside the active config layer, Claude-style
  ``{"hooks": {Event: [{matcher, hooks: [{type, command, timeout}]}]}}``;
  ``PreToolUse`` matcher ``Bash``, plus ``SessionStart`` and ``SessionEnd``
  (whose timeout Codex caps at 3 s). Codex accepts only a
  ``deny`` verdict from PreToolUse (``tenantry hook`` renders asks as denies).
- Rules: the site-rules block in ``AGENTS.md`` (project root or Codex home),
  and execpolicy rules ``rules/tenantry.rules`` beside the config refusing raw
  scheduler commands with the Tenantry equivalent (these apply before the
  hooks are trusted).
- Codex hands an MCP server only a few variables, so the entry forwards the
  ones that locate the daemon (``env_vars``) and, for a user install, pins the
  socket and state directory (``env``). ``TENANTRY_AGENT`` names the product;
  the session id comes from the hook's record (``agent_session``). Codex
  ignores new hooks until they are trusted in its ``/hooks`` screen: the
  installer says so (``TRUST_NOTE``).
- The entry is ``required``: Codex starts a turn without waiting for an
  optional MCP server, and leaves out every server whose tools it has not
  listed yet, so a shim slower to answer ``tools/list`` than Codex is to start
  (a loaded login node) gave the agent no Tenantry tools. A required server is
  waited for (up to ``startup_timeout_sec``); one that fails to start stops
  Codex with an error naming it rather than running without Tenantry.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tenantry.agents import files
from tenantry.agents.products.common import (
    SERVER,
    Target,
    hook_command,
    set_grouped_hooks,
)
from tenantry.agents.rules import SITE_RULES

AGENT = "codex"


def _home(t: Target) -> Path:
    env = os.environ.get("CODEX_HOME")
    return Path(env) if env and t.scope == "user" else t.home / ".codex"


def _dir(t: Target) -> Path:
    if t.scope == "project":
        return t.project / ".codex"
    if t.scope == "user":
        return _home(t)
    return t.system("/etc/codex")


def _set_server(doc: Any, entry: dict[str, Any] | None) -> None:
    import tomlkit

    servers = doc.get("mcp_servers")
    if entry is None:
        if servers is not None and SERVER in servers:
            del servers[SERVER]
            if not servers:
                del doc["mcp_servers"]
        return
    if servers is None:
        servers = tomlkit.table(is_super_table=True)
        doc["mcp_servers"] = servers
    table = tomlkit.table()
    for k, v in entry.items():
        table[k] = v
    servers[SERVER] = table


# Codex starts MCP servers with only a few variables: forward the ones Tenantry
# finds its daemon by (and pin them for a user install, where they are known)
STARTUP_TIMEOUT_S = 60

FORWARD = ("XDG_RUNTIME_DIR", "XDG_STATE_HOME", "TENANTRY_SOCKET", "TENANTRY_STATE_DIR")

TRUST_NOTE = (
    "Codex runs newly installed hooks only after you trust them: start `codex`, open"
    " /hooks and trust the tenantry hooks (until then shell commands bypass Tenantry)."
)


def server_entry(t: Target) -> dict[str, Any]:
    argv = t.argv0
    env = {"TENANTRY_AGENT": AGENT}
    if t.scope == "user":
        from tenantry.core.settings import load

        settings = load()
        env.update(TENANTRY_SOCKET=settings.socket, TENANTRY_STATE_DIR=settings.state_dir)
    return {
        "command": argv[0],
        "args": [*argv[1:], "mcp"],
        "env": env,
        "env_vars": list(FORWARD),
        # Codex gives an MCP server 10 s to start; a loaded login node can take longer
        "startup_timeout_sec": STARTUP_TIMEOUT_S,
        # else a turn that starts before tools/list is answered has no Tenantry tools
        "required": True,
    }


def rules_text() -> str:
    """Codex execpolicy rules: scheduler commands are refused with the Tenantry equivalent.

    They apply even before a person trusts the hooks (check one with
    ``codex execpolicy check --rules FILE squeue -u me``).
    """
    import json

    from tenantry.agents.steer import _SCHEDULER

    out = [
        "# Tenantry: written by `tenantry install`; `tenantry uninstall` removes it.",
        "# Scheduler commands go through Tenantry on this HPC system.",
    ]
    for name, instead in _SCHEDULER.items():
        why = f"Tenantry: {name} goes through Tenantry on this HPC system; instead use {instead}"
        out += [
            "prefix_rule(",
            f"    pattern = [{json.dumps(name)}],",
            '    decision = "forbidden",',
            f"    justification = {json.dumps(why)},",
            ")",
        ]
    return "\n".join(out) + "\n"


def hook_groups(t: Target) -> dict[str, dict[str, Any]]:
    handler = {"type": "command", "command": hook_command(t, AGENT), "timeout": 10}
    return {
        "PreToolUse": {"matcher": "Bash", "hooks": [handler]},
        "SessionStart": {"hooks": [handler]},
        "SessionEnd": {"hooks": [{**handler, "timeout": 3}]},  # Codex caps SessionEnd at 3 s
    }


def _requirements(doc: Any, command: str | None) -> None:
    entry = None if command is None else {"identity": {"command": command}}
    _set_server(doc, entry)


def install(t: Target) -> list[files.Change]:
    d = _dir(t)
    out = [
        files.edit_toml(d / "config.toml", lambda doc: _set_server(doc, server_entry(t))),
        files.edit_json(d / "hooks.json", lambda data: set_grouped_hooks(data, hook_groups(t))),
        files.whole_file(d / "rules" / "tenantry.rules", rules_text()),
    ]
    if t.scope == "system":
        out.append(
            files.edit_toml(d / "requirements.toml", lambda doc: _requirements(doc, t.argv0[0]))
        )
    else:
        rules = t.project / "AGENTS.md" if t.scope == "project" else d / "AGENTS.md"
        out.append(files.edit_block(rules, SITE_RULES))
    return out


def uninstall(t: Target) -> list[files.Change]:
    d = _dir(t)
    out = [
        files.edit_toml(d / "config.toml", lambda doc: _set_server(doc, None)),
        files.edit_json(d / "hooks.json", lambda data: set_grouped_hooks(data, None)),
        files.whole_file(d / "rules" / "tenantry.rules", None),
    ]
    if t.scope == "system":
        out.append(files.edit_toml(d / "requirements.toml", lambda doc: _requirements(doc, None)))
    else:
        rules = t.project / "AGENTS.md" if t.scope == "project" else d / "AGENTS.md"
        out.append(files.edit_block(rules, None))
    return out
