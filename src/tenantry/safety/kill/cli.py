"""``tenantry admin``: the kill switch (stop-session, stop-user, resume-session, stopped)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from tenantry.cli.common import client_from, command, emit, group, table

EPILOG = """\
examples:
  tenantry admin stop-session 3f2a9c         stop one agent session now
  tenantry admin stop-user alice --reason "runaway sweep"
  tenantry admin stopped                     list active stops
  tenantry admin resume-session 3f2a9c       let the session act again

A stop refuses every further request of the session, cancels its jobs, drains
its leases and ends its running commands. Human shells are never touched.
"""


def register(sub: Any) -> None:
    _, asub = group(sub, "admin", "kill switch: stop or resume agent sessions", epilog=EPILOG)
    for verb, arg, op_name, help_ in (
        (
            "stop-session",
            "session",
            "admin.stop_session",
            "stop one agent session (id or user/agent/session)",
        ),
        ("stop-user", "user", "admin.stop_user", "stop every agent session of a user"),
        ("resume-session", "session", "admin.resume_session", "resume a stopped session"),
        ("resume-user", "user", "admin.resume_user", "resume a stopped user's agents"),
    ):
        with command(asub, verb, _act, help_, epilog=EPILOG) as v:
            v.add_argument(arg.upper(), help=f"the {arg} to act on")
            if verb.startswith("stop"):
                v.add_argument(
                    "--reason", default="", help="shown to the agent and kept in the audit log"
                )
            v.set_defaults(op_name=op_name, arg=arg)
    with command(asub, "stopped", _stopped, "list active stops"):
        pass


def _act(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {args.arg: getattr(args, args.arg.upper())}
    if getattr(args, "reason", ""):
        params["reason"] = args.reason
    data = client_from(args).call(args.op_name, params)

    def human(d: dict[str, Any]) -> str:
        if "resumed" in d:
            return f"resumed {d['kind']} {d['target']}"
        lines = [
            f"stopped {d['kind']} {d['target']}"
            + (" (was already stopped)" if d.get("already_stopped") else ""),
            "  principals: "
            + (", ".join(d["principals"]) or "(none seen yet; future requests are refused)"),
            f"  jobs cancelled: {len(d['jobs_cancelled'])}  leases drained: {d['leases_drained']}"
            f"  commands ended: {d['commands_ended']}",
        ]
        if d.get("skipped"):
            lines.append(f"  not running in this daemon: {', '.join(d['skipped'])}")
        lines.extend(f"  error: {e}" for e in d.get("errors", []))
        return "\n".join(lines)

    emit(args, data, human)
    return 0 if not data.get("errors") else 1


def _stopped(args: argparse.Namespace) -> int:
    data = client_from(args).call("admin.list_stopped", {})

    def human(d: dict[str, Any]) -> str:
        return table(
            [
                [
                    s["kind"],
                    s["target"],
                    s["by"],
                    time.strftime("%Y-%m-%d %H:%M", time.localtime(s["stopped_at"])),
                    s["reason"],
                ]
                for s in d["stopped"]
            ],
            ["KIND", "TARGET", "BY", "SINCE", "REASON"],
        )

    emit(args, data, human)
    return 0
