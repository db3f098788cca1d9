"""``tenantry install``, ``tenantry uninstall`` and ``tenantry hook``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

AGENTS = ("claude-code", "codex", "gemini-cli", "opencode", "cursor")

INSTALL_EPILOG = """\
examples:
  tenantry install --agent claude-code              this project (.mcp.json, .claude/, CLAUDE.md)
  tenantry install --agent codex --user --dry-run   show the diff for ~/.codex, write nothing
  tenantry install --agent gemini-cli --user --yes  write without asking
  sudo tenantry install --agent claude-code --system --yes   managed settings for every user
  tenantry install --agent all --user --yes          every agent at once

What is written: the `tenantry` MCP server entry in the agent's own format,
the agent's hook running `tenantry hook` before shell commands and at session
start/end, and a short site-rules block (CLAUDE.md / AGENTS.md / GEMINI.md)
between tenantry markers. Every file changed is first backed up in Tenantry's
state directory (install/backups/, never in the project). Uninstall gives back
the original bytes of a file left as Tenantry wrote it, deletes only files
Tenantry created, and from a file edited since removes only Tenantry's
entries. Running install again changes nothing.
"""

HOOK_EPILOG = """\
The agent runs this itself (installed by `tenantry install`): the event JSON
arrives on stdin, the answer goes to stdout in the agent's own protocol.

examples:
  tenantry hook --agent claude-code < payload.json     answer one recorded event
  TENANTRY_HOOK_ON_UNREACHABLE=closed tenantry hook --agent codex < payload.json

Settings: hook_on_unreachable (closed-dangerous | closed | open) and
hook_redirect (true | false), see `tenantry settings`.
"""


def register(sub: Any) -> None:
    for name, remove in (("install", False), ("uninstall", True)):
        p: argparse.ArgumentParser = sub.add_parser(
            name,
            help=("remove Tenantry from" if remove else "plug Tenantry into") + " a coding agent",
            description=(
                "Remove what `tenantry install` wrote (other settings stay)."
                if remove
                else "Plug Tenantry into a coding agent: MCP server, hook and site rules."
            ),
            epilog=INSTALL_EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument(
            "--agent", required=True, choices=(*AGENTS, "all"), help="the agent product, or all"
        )
        where = p.add_mutually_exclusive_group()
        where.add_argument("--project", metavar="DIR", help="a project directory (default: .)")
        where.add_argument("--user", action="store_true", help="your user-wide agent config")
        where.add_argument("--system", action="store_true", help="machine-wide managed config")
        p.add_argument("--dry-run", action="store_true", help="show the diff, write nothing")
        p.add_argument("--yes", "-y", action="store_true", help="write without asking")
        p.add_argument("--root", help="prefix for --system paths (packaging and tests)")
        p.add_argument("--json", action="store_true", help="print machine-readable JSON")
        if not remove:
            p.add_argument(
                "--wrapper",
                metavar="DIR",
                help="also write a wrapper per agent into DIR (put it first on PATH) so that"
                " starting the agent starts a sandboxed `tenantry agent` session",
            )
        p.set_defaults(handler=_uninstall if remove else _install)
    h: argparse.ArgumentParser = sub.add_parser(
        "hook",
        help="answer an agent's hook event (run by the agent)",
        description="Answer one agent hook event from stdin in the agent's own protocol.",
        epilog=HOOK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    h.add_argument("--agent", required=True, choices=AGENTS, help="which agent's protocol")
    h.set_defaults(handler=_hook)


def _hook(args: argparse.Namespace) -> int:
    from tenantry.agents.hook import main

    return main(args.agent)


def _install(args: argparse.Namespace) -> int:
    if getattr(args, "wrapper", None) and not args.dry_run:
        import sys

        from tenantry.agents.wrapper import write_wrappers

        agents = list(AGENTS) if args.agent == "all" else [args.agent]
        for w in write_wrappers(agents, args.wrapper, force=args.yes):
            sys.stderr.write(
                f"wrapper {w['wrapper']} -> tenantry agent -- {w['real']}\n"
                if "wrapper" in w
                else f"no wrapper for {w['agent']}: {w['skipped']}\n"
            )
    return _run(args, remove=False)


def _uninstall(args: argparse.Namespace) -> int:
    return _run(args, remove=True)


def _run(args: argparse.Namespace, *, remove: bool) -> int:
    from tenantry.agents import files, installer
    from tenantry.cli.common import emit, settings_from
    from tenantry.core.errors import UsageError

    scope = "system" if args.system else "user" if args.user else "project"
    settings = settings_from(args)
    # http hooks cannot fail closed on every command (hook_on_unreachable = closed), and a
    # TCP caller is known by its uid only, never as a sandboxed session (claimed_agents =
    # refuse): then the command hook stays
    http = settings.hook_http
    if settings.hook_on_unreachable == "closed" or settings.claimed_agents == "refuse":
        http = ""
    t = installer.target(scope, args.project, root=args.root, hook_http=http)
    records = files.Records(settings.state_path / "install")
    agents = list(AGENTS) if args.agent == "all" else [args.agent]
    skipped: list[str] = []
    plans = []
    for agent in agents:
        try:
            plan = installer.plan(agent, t, remove=remove)
            if remove:
                plan = installer.Plan(plan.agent, plan.scope, records.restore(plan.changes))
            plans.append(plan)
        except UsageError as err:
            if args.agent != "all":
                raise
            skipped.append(f"{agent}: {err.message}")
    # agents may share a file (Codex and OpenCode both read AGENTS.md): plan it once
    seen: set[str] = set()
    owned: list[tuple[str, files.Change]] = []
    for plan in plans:
        for c in plan.pending:
            if str(c.path) not in seen:
                seen.add(str(c.path))
                owned.append((plan.agent, c))
    pending = [c for _, c in owned]
    report: dict[str, Any] = {
        "agent": args.agent,
        "scope": scope,
        "action": "uninstall" if remove else "install",
        "changes": [
            {"agent": agent, "path": str(c.path), "action": c.action, "diff": c.diff()}
            for agent, c in owned
        ],
        "applied": False,
    }
    if skipped:
        report["skipped"] = skipped
    if not pending:
        report["note"] = "nothing to do: " + ("not installed" if remove else "already installed")
        emit(args, report, lambda r: f"tenantry: {r['note']} ({args.agent}, {scope})")
        return 0
    if not args.json:
        sys.stdout.write("".join(c.diff() for c in pending))
    if args.dry_run:
        if args.json:
            emit(args, report)
        else:
            sys.stdout.write(f"(dry run: {len(pending)} file(s) would change)\n")
        return 0
    if not args.yes:
        if args.json or not sys.stdin.isatty():
            raise UsageError(
                "refusing to write without confirmation",
                hint="add --yes (or --dry-run to look first)",
            )
        answer = input(f"Apply these changes to {len(pending)} file(s)? [y/N] ")
        if answer.strip().lower() not in {"y", "yes"}:
            sys.stdout.write("nothing written\n")
            return 1
    done = files.apply(pending, records, install=not remove)
    backups = {d["path"]: d["backup"] for d in done}
    for c in report["changes"]:
        c["backup"] = backups.get(c["path"], "")
    report["applied"] = True
    if not remove:
        _warm_mcp(t.argv0)
    if not remove and "codex" in agents:
        from tenantry.agents.products.codex import TRUST_NOTE

        report["next_steps"] = [TRUST_NOTE]
    emit(args, report, _human)
    return 0


def _warm_mcp(argv0: list[str]) -> None:
    """Run the installed ``tenantry mcp`` once, so its next start answers tools/list at once."""
    import contextlib
    import json
    import subprocess

    from tenantry.client.mcp_hello import after_initialize, initialize

    msgs = [initialize("tenantry-install"), *after_initialize()]
    # best effort: a failure here only costs the first session a slower start
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        subprocess.run(
            [*argv0, "mcp"],
            input="".join(json.dumps(m) + "\n" for m in msgs),
            capture_output=True,
            text=True,
            timeout=60,
        )


def _human(report: dict[str, Any]) -> str:
    lines = []
    for c in report["changes"]:
        extra = f" (backup: {c['backup']})" if c.get("backup") else ""
        lines.append(f"{c['action']:8} {c['path']}{extra}")
    verb = "removed from" if report["action"] == "uninstall" else "installed for"
    lines.append(f"tenantry {verb} {report['agent']} ({report['scope']})")
    lines.extend(f"next: {step}" for step in report.get("next_steps", []))
    return "\n".join(lines)
