"""Claude Code: ``.mcp.json`` / ``~/.claude.json`` / managed files, hooks in settings.

- MCP: project ``DIR/.mcp.json``, user ``~/.claude.json``, system
  ``/etc/claude-code/managed-mcp.json`` (all ``{"mcpServers": {name: {type,
  command, args, env}}}``). A managed-mcp.json fixes the server set for every
  user of the machine: with ``--system`` Tenantry becomes that set's member.
- Hooks: ``PreToolUse`` and ``PostToolUseFailure`` (matcher ``Bash``; the latter
  adds the facility lessons for a failed command), ``SessionStart``, ``SessionEnd`` in
  ``DIR/.claude/settings.json``, ``~/.claude/settings.json`` or
  ``/etc/claude-code/managed-settings.json``; handlers ``{type: command,
  command, timeout}`` (seconds).
- With ``hook_http`` set (the daemon's loopback hook listener), the tool hooks
  are Claude Code's ``http`` type instead: Claude Code POSTs each payload to
  the daemon, which decides (``gateway.hookserve``), and no process starts per
  command. An http hook that gets no answer lets the command through, so the
  command hook stays for the commands the built-in dangerous list can match
  (``if`` patterns, ``FALLBACK_IF``): when the daemon is down they still fail
  closed; when it is up they are decided twice, with the same verdict.
- Rules: the site-rules block in ``CLAUDE.md`` (project root, ``~/.claude/``,
  or ``/etc/claude-code/``).
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path
from typing import Any

from tenantry.agents import files
from tenantry.agents.products.common import (
    Target,
    hook_command,
    hook_url,
    set_grouped_hooks,
    set_server,
)
from tenantry.agents.rules import SITE_RULES

AGENT = "claude-code"


def _paths(t: Target) -> tuple[Path, Path, Path]:
    if t.scope == "project":
        return (
            t.project / ".mcp.json",
            t.project / ".claude" / "settings.json",
            t.project / "CLAUDE.md",
        )
    if t.scope == "user":
        return (
            t.home / ".claude.json",
            t.home / ".claude" / "settings.json",
            t.home / ".claude" / "CLAUDE.md",
        )
    return (
        t.system("/etc/claude-code/managed-mcp.json"),
        t.system("/etc/claude-code/managed-settings.json"),
        t.system("/etc/claude-code/CLAUDE.md"),
    )


def server_entry(t: Target) -> dict[str, Any]:
    argv = t.argv0
    return {"type": "stdio", "command": argv[0], "args": [*argv[1:], "mcp"], "env": {}}


# Where the built-in dangerous list (agents.steer.dangerous) can match: the
# programs it names, and the shells and wrappers a command can hide them in.
# `sbatch` is on it only with an array (`-a`, `--array`; the list flags 100+
# tasks) or in a loop (the loop's own words are here): a plain `sbatch` is the
# http hook's alone, so the daemon's answer does not wait for a hook process.
# The array patterns match an argument that *starts* with `-a` or `--array`,
# the spellings the list reads (`agents.steer._array_tasks`), never a `-a`
# inside a word: `--account=...`, `-p gpu-a100`, `-o /home/tt-a05/out`.
FALLBACK_IF = (
    *(
        f"Bash({name} *)"
        for name in (
            "rm", "scancel", "kill", "killall", "pkill", "chmod", "chown", "dd",
            "shred", "wipefs", "mkfs", "mkfs.*", "bash", "sh", "zsh", "dash", "ksh", "eval",
            "xargs", "sudo", "env", "nohup", "timeout", "nice", "exec", "command", "watch",
            "time", "for", "while", "until", ":",
        )
    ),
    "Bash(sbatch -a*)",
    "Bash(sbatch * -a*)",
    "Bash(sbatch --array*)",
    "Bash(sbatch * --array*)",
)  # fmt: skip


_SUBCOMMANDS = re.compile(r"&&|\|\||[;|&\n]")


def fallback_runs(command: str) -> bool:
    """Whether Claude Code's ``if`` filter runs the fallback command hook for
    ``command``: a ``FALLBACK_IF`` pattern matches one of its subcommands (``*``
    any text). A model of Claude Code's matching, for benchmarks and tests; the
    agent tests check the real one."""
    parts = [p.strip() for p in _SUBCOMMANDS.split(command) if p.strip()]
    globs = [p[len("Bash(") : -1] for p in FALLBACK_IF]
    return any(
        fnmatch.fnmatchcase(part, glob) or (glob.endswith(" *") and part == glob[:-2])
        for part in parts
        for glob in globs
    )


def hook_groups(t: Target) -> dict[str, dict[str, Any]]:
    handler = {"type": "command", "command": hook_command(t, AGENT), "timeout": 10}
    if t.hook_http:
        http = {"type": "http", "url": hook_url(t, AGENT), "timeout": 10}
        fallback = [{**handler, "if": pattern} for pattern in FALLBACK_IF]
        return {
            "PreToolUse": {"matcher": "Bash", "hooks": [http, *fallback]},
            "PostToolUseFailure": {"matcher": "Bash", "hooks": [http]},
            "SessionStart": {"hooks": [handler]},
            "SessionEnd": {"hooks": [handler]},
        }
    return {
        "PreToolUse": {"matcher": "Bash", "hooks": [handler]},
        "PostToolUseFailure": {"matcher": "Bash", "hooks": [handler]},
        "SessionStart": {"hooks": [handler]},
        "SessionEnd": {"hooks": [handler]},
    }


def install(t: Target) -> list[files.Change]:
    mcp, settings, rules = _paths(t)
    return [
        files.edit_json(mcp, lambda d: set_server(d, "mcpServers", server_entry(t))),
        files.edit_json(settings, lambda d: set_grouped_hooks(d, hook_groups(t))),
        files.edit_block(rules, SITE_RULES),
    ]


def uninstall(t: Target) -> list[files.Change]:
    mcp, settings, rules = _paths(t)
    return [
        files.edit_json(mcp, lambda d: set_server(d, "mcpServers", None)),
        files.edit_json(settings, lambda d: set_grouped_hooks(d, None)),
        files.edit_block(rules, None),
    ]
