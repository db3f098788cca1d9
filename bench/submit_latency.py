"""What a job submission costs through Tenantry on the real Slurm, user mode and facility mode.

Starts a facility service, a user-mode daemon and an executor (facility mode)
on the Slurm backend, as ``bench/facility_overhead.py`` does with the local
one, and submits a one-line job N times back to back through a warm
in-process client (``jobs.submit`` as an agent, each with its own name so
none is deduplicated), in each mode in turn, ``--rounds`` times. Prints the
p50/p99 of each mode's submissions beside a bare ``sbatch`` of the same
script, and the controller RPCs per submission (``sdiag``, every user: the
submissions' own, the status queries they cause, and the slurmd messages of
the jobs' ends)::

    PYTHONPATH=src python bench/submit_latency.py [--n 150] [--rounds 2] [--json OUT]

Needs a Slurm controller the caller may submit to (``scripts/dev-slurm``).
Budgets are lifted (``replace_defaults = true``) so no submission is refused; the
facility service sends its audit anchors to the system log, as an installed one does.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import parser, pct
from facility_overhead import AGENT, start_daemons, stop_daemons
from sdiag import counts
from tenantry.client.sync import Client
from tenantry.core.settings import load

MODES = ("user mode", "facility mode")


def _rpcs() -> int:
    out = subprocess.run(["sdiag"], capture_output=True, text=True, check=True).stdout
    section = out.split("Remote Procedure Call statistics by message type", 1)[1]
    return sum(counts(section.split("Remote Procedure Call statistics by user", 1)[0]).values())


def _stats(lat: list[float]) -> dict[str, float]:
    return {"p50_ms": statistics.median(lat) * 1000, "p99_ms": pct(lat, 0.99) * 1000}


def run(n: int, rounds: int) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="tnt-subb-"))
    envs, procs = start_daemons(base, backend="slurm")
    try:
        script = base / "job.sh"
        script.write_text("#!/bin/sh\ntrue\n")
        names = itertools.count()
        lat: dict[str, list[float]] = {m: [] for m in ("bare sbatch", *MODES)}
        rpcs: dict[str, int] = dict.fromkeys(lat, 0)
        clients = {m: Client(load(env=envs[m]), autostart=False, claims=AGENT) for m in MODES}

        def submit(mode: str) -> None:
            name = f"tnt-subb-{next(names)}"
            if mode == "bare sbatch":
                argv = ["sbatch", "-J", name, "-t", "1", "--mem", "64M", "-o", "/dev/null"]
                subprocess.run([*argv, str(script)], cwd=base, check=True, capture_output=True)
                return
            clients[mode].call("jobs.submit", {
                "script": str(script), "script_text": script.read_text(), "cwd": str(base),
                "name": name, "resources": {"time_s": 60, "mem_mb": 64}, "output": "/dev/null",
                "env": {"PATH": os.environ["PATH"]},
            })  # fmt: skip

        for _ in range(rounds):
            for mode in lat:
                submit(mode)  # warm-up
                before = _rpcs()
                for _ in range(n):
                    t = time.perf_counter()
                    submit(mode)
                    lat[mode].append(time.perf_counter() - t)
                time.sleep(1.5)  # the status queries the submissions asked for
                rpcs[mode] += _rpcs() - before
        return {
            mode: {**_stats(lat[mode]), "rpcs_per_submission": rpcs[mode] / (n * rounds)}
            for mode in lat
        }
    finally:
        stop_daemons(procs, base)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=150, help="submissions per mode and round")
    ap.add_argument("--rounds", type=int, default=2, help="rounds, each mode in turn")
    args = ap.parse_args()
    if args.n < 1 or args.rounds < 1:
        ap.error("--n and --rounds must be positive")
    if shutil.which("sbatch") is None:
        raise SystemExit("no sbatch on PATH: start Slurm first (scripts/dev-slurm start)")
    load_before = os.getloadavg()
    out = run(args.n, args.rounds)
    load_after = os.getloadavg()
    print(f"{'':16} {'p50 ms':>8} {'p99 ms':>8} {'RPCs per submission':>20}")
    for mode, r in out.items():
        print(f"{mode:16} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} {r['rpcs_per_submission']:20.2f}")
    print(f"n={args.n} rounds={args.rounds} load average before {load_before}, after {load_after}")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"results": out, "n": args.n, "rounds": args.rounds,
             "loadavg": [load_before, load_after]}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
