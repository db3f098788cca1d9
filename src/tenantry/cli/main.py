"""The ``tenantry`` command line: a thin adapter over the daemon's ops.

The client path imports only the standard library so ``tenantry run -- true``
starts fast; heavy modules (uvicorn, mcp, polars) load only in the commands
that need them. Each concept adds its commands from its own ``cli`` module
(listed in ``EXTENSIONS``) through ``register(subparsers)``.
"""

from __future__ import annotations

import sys

# the hook and `tenantry mcp` run before argparse (see ``_fast``): nothing heavy at import
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import TypeVar

    from tenantry.cli.common import Args, Handler

    A = TypeVar("A", bound=Args)  # argparse's namespace, or fastrun's RunArgs or SubmitArgs

# Which module adds each subcommand. A module defines ``register(sub) -> None``
# and sets ``handler=`` on its parsers with ``set_defaults``. Only the module of
# the command being run is imported, so the CLI starts fast however many
# commands exist; a test checks this table against what each module registers.
COMMANDS: dict[str, str] = {
    **dict.fromkeys(
        (
            "run",
            "submit",
            "status",
            "jobs",
            "wait",
            "cancel",
            "logs",
            "sessions",
            "events",
            "info",
            "settings",
            "serve",
            "mcp",
            "version",
        ),
        "tenantry.cli.core",
    ),
    **dict.fromkeys(("install", "uninstall", "hook"), "tenantry.agents.cli"),
    **dict.fromkeys(("stop", "doctor"), "tenantry.cli.daemon"),
    "completion": "tenantry.cli.completion",
    "budgets": "tenantry.safety.budgets.cli",
    "admin": "tenantry.safety.kill.cli",
    "guard": "tenantry.safety.guard.cli",
    "audit": "tenantry.safety.audit.cli",
    **dict.fromkeys(("policy", "approve", "approvals"), "tenantry.safety.policy.cli"),
    "memory": "tenantry.memory.cli",
    "shims": "tenantry.agents.shims.cli",
    **dict.fromkeys(("report", "simulate"), "tenantry.report.cli"),
    **dict.fromkeys(
        ("index", "find", "grep", "ls", "stat", "du", "tree", "recent", "git"),
        "tenantry.index.cli",
    ),
    "leases": "tenantry.leases.cli",
    "pilot": "tenantry.leases.cli",
    "agent": "tenantry.safety.sandbox.cli",
    "facility": "tenantry.cli.facility",
}
EXTENSIONS: tuple[str, ...] = tuple(dict.fromkeys(COMMANDS.values()))
_GLOBAL_WITH_VALUE = ("--socket", "--state-dir")

DESCRIPTION = """\
Tenantry: a facility-aware gateway for coding agents on HPC systems.

Agents (and people) run short commands, submit and watch batch jobs, search
the workspace and the facility memory through one daemon that caches job
status, enforces policy and records everything. The daemon starts on demand.
"""

EPILOG = """\
examples:
  tenantry run -- pytest -x            run a short command, stream its output
  tenantry submit --time 10 job.sh     submit a batch job, print its id
  tenantry wait 3 --timeout 600        block until job 3 ends
  tenantry jobs --json                 list your jobs as JSON
  tenantry mcp                         serve MCP on stdio for a coding agent
"""


def _version() -> str:
    from tenantry import __version__

    return __version__


def command_of(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (skipping global options), if any."""
    it = iter(argv)
    for tok in it:
        if tok in _GLOBAL_WITH_VALUE:
            next(it, None)
        elif not tok.startswith("-"):
            return tok
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    import argparse
    import importlib

    from tenantry.cli.parser import Parser

    parser = Parser(
        prog="tenantry",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--socket", help="daemon socket (default: TENANTRY_SOCKET or per-user)")
    parser.add_argument(
        "--state-dir",
        metavar="DIR",
        help="state directory (default: TENANTRY_STATE_DIR or ~/.local/state/tenantry)",
    )
    parser.add_argument(
        "--version", action="version", version=f"tenantry {_version()}", help="print the version"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = (COMMANDS[command],) if command in COMMANDS else EXTENSIONS
    for name in modules:
        mod = importlib.import_module(name)
        # a module may build only the command asked for (`tenantry run` starts cold often)
        only = getattr(mod, "register_only", None) if command in COMMANDS else None
        if only is not None:
            only(sub, command)
        else:
            mod.register(sub)
    return parser


_HOOK_AGENTS = ("claude-code", "codex", "gemini-cli", "opencode", "cursor")


def _fast(argv: list[str]) -> tuple[str, dict[str, str]] | None:
    """``[global options] hook|mcp ...`` without help flags: run before building argparse."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i] in _GLOBAL_WITH_VALUE and i + 1 < len(argv):
        opts[argv[i].lstrip("-")] = argv[i + 1]
        i += 2
    rest = argv[i:]
    if rest == ["--version"] and not opts:
        return "version", opts
    if rest == ["mcp"]:
        return "mcp", opts
    if len(rest) == 3 and rest[:2] == ["hook", "--agent"]:
        return "hook", {**opts, "agent": rest[2]}
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    fast = _fast(argv)
    if fast is not None and fast[0] == "hook" and fast[1]["agent"] in _HOOK_AGENTS:
        # runs before every agent tool call: no argparse, no settings of its own
        import os

        from tenantry.agents.hook_fast import main as hook_main

        for opt, var in (("socket", "TENANTRY_SOCKET"), ("state-dir", "TENANTRY_STATE_DIR")):
            if opt in fast[1]:
                os.environ[var] = fast[1][opt]
        return hook_main(fast[1]["agent"])
    if fast is not None and fast[0] == "version":
        sys.stdout.write(f"tenantry {_version()}\n")
        return 0
    if fast is not None and fast[0] == "mcp":
        from tenantry.gateway.mcp_start import main as mcp_main

        opts = fast[1]
        return mcp_main(opts.get("state-dir"), opts.get("socket"))
    command = command_of(argv)
    if command == "run":  # started cold for every agent command: no argparse when plain
        from tenantry.cli.fastrun import parse

        plain = parse(argv)
        if plain is not None:
            from tenantry.cli.core import _run

            return _handle(_run, plain)
    if command == "submit":  # an agent's sbatch the hook redirected: no argparse when plain
        from tenantry.cli.fastrun import parse_submit

        job = parse_submit(argv)
        if job is not None:
            from tenantry.cli.core import _submit

            return _handle(_submit, job)
    parser = build_parser(command)
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return _handle(handler, args)


def _handle(handler: Callable[[A], int], args: A) -> int:
    """Run a command's handler; its TenantryError becomes a message and an exit code."""
    from tenantry.core import errors

    try:
        return handler(args)
    except errors.TenantryError as err:
        from tenantry.cli.common import fail

        return fail(args, err)
    except KeyboardInterrupt:
        sys.stderr.write("tenantry: interrupted\n")
        return 130
    except BrokenPipeError:
        return 141
