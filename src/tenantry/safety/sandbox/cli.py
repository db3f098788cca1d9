"""``tenantry agent``: run a coding agent (or any program) as a sandboxed session."""

from __future__ import annotations

import argparse
from typing import Any

from tenantry.cli.common import client_from, command

EPILOG = """\
examples:
  tenantry agent -- claude                      Claude Code as a sandboxed session
  tenantry agent --agent codex -- codex
  tenantry agent --project chem -- bash         any program; its shell is the agent

Inside, the session's own socket sits at the standard place ($XDG_RUNTIME_DIR/
tenantry/sock): everything the program asks Tenantry is attributed to this
session, whatever it claims. Tenantry's state, MUNGE, ~/.ssh, ~/.gnupg, cloud
credentials and other users' homes are hidden; the current directory (and the
sandbox_writable setting's directories) are writable, the rest read-only;
sbatch/squeue/scancel are Tenantry's shims. `tenantry admin stop-session ID`
ends the whole sandbox at once. See docs/sandbox.md.
"""


def register(sub: Any) -> None:
    with command(
        sub,
        "agent",
        _agent,
        "start a coding agent in a sandbox, as a session that cannot change who it is",
        json=False,
        epilog=EPILOG,
    ) as p:
        p.add_argument(
            "--agent",
            default="",
            help="agent product (claude-code, codex, gemini-cli, opencode, cursor, ...);"
            " default: guessed from the command",
        )
        p.add_argument("--project", default="", help="project/account the session works for")
        p.add_argument(
            "--tier",
            choices=("read-only", "standard", "trusted"),
            default="",
            help="the session's tier; it can only be stricter than the facility's (e.g. read-only:"
            " look and query, never submit, cancel or write)",
        )
        p.add_argument("--quiet", action="store_true", help="do not print the session banner")
        p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD ARGS...")


GUESS = {
    "claude": "claude-code",
    "codex": "codex",
    "gemini": "gemini-cli",
    "opencode": "opencode",
    "cursor-agent": "cursor",
    "openhands": "openhands",
}


def _agent(args: argparse.Namespace) -> int:
    import os

    from tenantry.core.errors import UsageError
    from tenantry.safety.sandbox.launcher import launch

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("no command to run", hint="tenantry agent -- claude")
    agent = args.agent or GUESS.get(os.path.basename(command[0]), "agent")
    client = client_from(args, claims={"agent": "human", "session": "", "host": "", "project": ""})
    return launch(
        client, command, agent=agent, project=args.project, tier=args.tier, quiet=args.quiet
    )
