"""``tenantry leases`` (list, release) and ``tenantry pilot`` (the lease worker).

Standard library only at import time: the CLI starts fast.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

from tenantry.cli.common import add_json, client_from, command, emit, group, table

LEASES_EPILOG = """\
examples:
  tenantry leases                 your leases: state, slots in use, idle, served
  tenantry leases --json          the same as JSON (with idle core-seconds)
  tenantry leases --all           include released and lost leases
  tenantry leases release l-1a2b  release a lease (running commands finish first)
  tenantry leases result c-9f..   result of a command that ended during a restart
"""

PILOT_EPILOG = """\
Started by the daemon inside a lease allocation; you rarely run it by hand.
The lease secret comes from TENANTRY_LEASE_SECRET or --secret-file, never argv.

example:
  TENANTRY_LEASE_SECRET=... tenantry pilot --connect 127.0.0.1:7070 --lease l-1a2b
"""


LEASES_HELP = "list or release warm leases (pilot allocations)"


def register(sub: Any) -> None:
    about = "Warm leases: allocations that run short commands without new jobs."
    p, verbs = group(
        sub, "leases", LEASES_HELP, dest="leases_verb", description=about, epilog=LEASES_EPILOG
    )
    add_json(p)
    p.add_argument("--all", action="store_true", help="include ended leases")
    p.set_defaults(handler=_list)
    with command(verbs, "release", _release, "release a lease") as r:
        r.add_argument("id", help="lease id (from `tenantry leases`)")
    with command(
        verbs, "result", _result, "a result replayed by a pilot after a daemon restart"
    ) as g:
        g.add_argument("id", help="command id")

    with command(
        sub,
        "pilot",
        _pilot,
        "run the lease worker (started inside allocations)",
        json=False,
        description="The lease worker: dials back to the daemon and runs its commands.",
        epilog=PILOT_EPILOG,
    ) as w:
        w.add_argument("--connect", required=True, metavar="HOST:PORT", help="daemon address")
        w.add_argument("--lease", required=True, help="lease id")
        w.add_argument("--slots", type=int, default=1, help="commands run at once (default 1)")
        w.add_argument("--walltime", type=float, default=0, help="allocation seconds (0: none)")
        w.add_argument("--drain", type=float, default=120, help="stop taking work this long before")
        w.add_argument(
            "--orphan", type=float, default=180, help="exit after this long without daemon"
        )
        w.add_argument("--secret-file", help="file holding the secret (if not in the environment)")


def _fmt_idle(x: Any) -> str:
    return "-" if x is None else f"{float(x):.0f}s"


def _human(data: dict[str, Any]) -> str:
    rows = [
        [
            x["id"],
            x["state"],
            x["pool"],
            f"{x['in_use']}/{x['slots']}",
            _fmt_idle(x["idle_s"]),
            str(x["served"]),
            f"{x['idle_core_s']:.0f}",
            x["backend_id"] or "-",
        ]
        for x in data["leases"]
    ]
    head = ["ID", "STATE", "POOL", "IN USE", "IDLE", "SERVED", "IDLE CORE-S", "JOB"]
    return table(rows, head) + f"\nidle core-seconds: {data['idle_core_s']:.0f}"


def _list(args: argparse.Namespace) -> int:
    data = client_from(args).call("leases.list", {"all": bool(args.all)})
    emit(args, data, _human)
    return 0


def _release(args: argparse.Namespace) -> int:
    data = client_from(args).call("leases.release", {"id": args.id})
    emit(args, data, lambda d: f"lease {d['lease']['id']}: {d['lease']['state']}")
    return 0


def _result(args: argparse.Namespace) -> int:
    data = client_from(args).call("leases.result", {"id": args.id})
    emit(args, data, None)
    return 0


def _pilot(args: argparse.Namespace) -> int:
    import logging

    from tenantry.core.errors import UsageError
    from tenantry.leases.pilot.worker import SECRET_ENV, PilotConfig, run_pilot, walltime_end

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s pilot %(levelname)s %(message)s", stream=sys.stderr
    )
    host, _, port = str(args.connect).rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--connect {args.connect!r} is not HOST:PORT")
    secret = os.environ.pop(SECRET_ENV, "")
    if not secret and args.secret_file:
        with open(args.secret_file) as fh:
            secret = fh.read().strip()
    if not secret:
        raise UsageError(f"no lease secret: set {SECRET_ENV} or pass --secret-file")
    cfg = PilotConfig(
        host=host.strip("[]"),
        port=int(port),
        lease=args.lease,
        secret=secret,
        slots=max(1, args.slots),
        walltime_end=walltime_end(args.walltime),
        drain_s=args.drain,
        orphan_s=args.orphan,
    )
    started = time.time()
    code = run_pilot(cfg)
    sys.stderr.write(f"pilot {args.lease}: exit {code} after {time.time() - started:.1f} s\n")
    return code
