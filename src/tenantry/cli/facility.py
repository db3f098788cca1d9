"""``tenantry facility``: serve, install and inspect the facility service.

Standard library only at import time (the client path).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from tenantry.cli.common import client_from, command, emit, group, settings_from

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EPILOG = """\
examples:
  tenantry facility install --dry-run --json     what install would write
  sudo tenantry facility install                 account, directories, unit, config
  sudo systemctl enable --now tenantry-facility  start it (or tenantry-facility-start)
  tenantry serve --facility /run/tenantry/facility.sock   a user's daemon in facility mode
  tenantry facility status                       who the facility says you are
  tenantry facility dashboard                    your login link to its dashboard
  tenantry report --live                         the facility's characterization report
"""


def register(sub: Any) -> None:
    _, fsub = group(
        sub,
        "facility",
        "the facility service: one Tenantry for every user of a cluster",
        description="Facility mode: a service under its own system account holds what governs"
        " agents (policy, budgets, kill switch, audit, memory); each user's daemon becomes the"
        " user's executor and asks it for every decision. See docs/facility.md.",
        epilog=EPILOG,
    )
    with command(
        fsub,
        "serve",
        _serve,
        "run the facility service in the foreground (as its system account)",
        json=False,
        epilog="examples:\n  tenantry --state-dir /var/lib/tenantry facility serve\n"
        "  tenantry facility serve --tcp 10.0.0.1:7070   daemons on other login nodes:\n"
        "      tenantry serve --facility munge://10.0.0.1:7070",
    ) as s:
        s.add_argument("--listen", metavar="PATH", help="socket to serve (default facility_socket)")
        s.add_argument(
            "--backend", choices=["local", "slurm"], help="scheduler facts from (default)"
        )
        s.add_argument(
            "--http", help="also serve the facility's dashboard and /metrics on HOST:PORT"
        )
        s.add_argument(
            "--tcp",
            metavar="HOST:PORT",
            help="also listen for daemons on other login nodes, proven by MUNGE (facility_tcp)",
        )
    with command(
        fsub,
        "install",
        _install,
        "write the system account, directories, systemd unit, start script and config",
        epilog="examples:\n  tenantry facility install --dry-run --json\n"
        "  tenantry facility install --root /tmp/pkg --no-accounts",
    ) as i:
        i.add_argument("--account", default="tenantry", help="system account (default tenantry)")
        i.add_argument("--staff-group", default="tenantry-staff", help="Unix group of staff")
        i.add_argument("--state-dir", dest="install_state", default="/var/lib/tenantry")
        i.add_argument("--listen", default="/run/tenantry/facility.sock", help="service socket")
        i.add_argument("--backend", choices=["local", "slurm"], default="slurm")
        i.add_argument("--config-dir", default="/etc/tenantry", help="policy and shared config")
        i.add_argument("--unit-dir", default="/etc/systemd/system", help="where the unit goes")
        i.add_argument("--bin-dir", default="/usr/local/sbin", help="where the start script goes")
        i.add_argument("--root", default="", help="prefix every written path (packaging, tests)")
        i.add_argument("--no-accounts", action="store_true", help="do not create account or group")
        i.add_argument("--tenantry", default="", help="the tenantry program the service runs")
        i.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    with command(fsub, "status", _status, "who the facility service says you are (staff or not)"):
        pass
    with command(
        fsub,
        "jobs",
        _jobs,
        "jobs at the facility: yours (staff: every user's)",
        epilog="examples:\n  tenantry facility jobs --active --json",
    ) as j:
        j.add_argument("--active", action="store_true", help="only jobs not finished")
    with command(
        fsub,
        "dashboard",
        _dashboard,
        "a login link to the facility's dashboard as yourself (staff: every user)",
        epilog="The link logs you in as the user the service proves you are; it shows your own\n"
        "rows (staff, as themselves: the whole facility). Keep it private: it is your login.\n"
        "examples:\n  tenantry facility dashboard\n  tenantry facility dashboard --json",
    ):
        pass
    with command(fsub, "events", _events, "events at the facility: yours (staff: any user's)") as e:
        e.add_argument("--since", type=float, default=3600.0, help="seconds back (default 3600)")
        e.add_argument("--user", default="", help="staff: only this user's")
        e.add_argument("--type", action="append", default=[], help="event type (repeatable)")


def _serve(args: argparse.Namespace) -> int:
    from tenantry.gateway.facility import run

    return run(settings_from(args, facility_socket="listen", http="http", facility_tcp="tcp"))


def _install(args: argparse.Namespace) -> int:
    from tenantry.facility.install import Layout, apply, plan

    exe = os.path.abspath(args.tenantry or shutil.which("tenantry") or sys.argv[0])
    lay = Layout(
        account=args.account,
        staff_group=args.staff_group,
        state_dir=args.install_state,
        socket=args.listen,
        tenantry=exe,
        backend=args.backend,
        config_dir=args.config_dir,
        unit_dir=args.unit_dir,
        sbin_dir=args.bin_dir,
    )
    steps = plan(lay, root=args.root, accounts=not args.no_accounts)
    if args.dry_run:
        rows = [s.to_dict() for s in steps]
        emit(args, {"steps": rows}, lambda d: "\n".join(_row(s) for s in d["steps"]))
        return 0
    done = apply(steps)
    emit(args, {"changed": done}, lambda d: "\n".join(d["changed"]) or "nothing to change")
    return 0


def _row(step: dict[str, Any]) -> str:
    return f"{step['kind']:8} {step.get('path') or step.get('name')}"


def _status(args: argparse.Namespace) -> int:
    data = client_from(args).call("facility.whoami", {})
    emit(args, data, lambda d: f"{d['principal']['user']} (staff: {d['staff']})")
    return 0


def _jobs(args: argparse.Namespace) -> int:
    data = client_from(args).call("facility.jobs", {"active": args.active})
    emit(
        args,
        data,
        lambda d: "\n".join(f"{j['user']:12} {j['id']:8} {j['state']}" for j in d["jobs"]),
    )
    return 0


def _dashboard(args: argparse.Namespace) -> int:
    data = client_from(args).call("facility.dashboard_login", {})
    emit(args, data, lambda d: d["url"] or f"token: {d['token']} (the service serves no --http)")
    return 0


def _events(args: argparse.Namespace) -> int:
    params = {"since": -abs(args.since), "types": args.type, "user": args.user}
    data = client_from(args).call("facility.events", params)
    emit(
        args,
        data,
        lambda d: "\n".join(f"{e['type']:18} {e['principal']} {e['subject']}" for e in d["events"]),
    )
    return 0
