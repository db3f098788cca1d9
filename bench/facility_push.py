"""State-change latency at a user's executor: pushed by the facility service vs polled.

On the real Slurm of scripts/dev-slurm, with the facility of the end-to-end tests
(tests/facility/conftest.py: the service as its system account, tt-alice's daemon
in facility mode), each job is a short ``sleep``; a ``tenantry wait`` client waits
for it through alice's daemon. The latency of one state change is the time from
the facility poller seeing the job's end (``observed_at`` of the COMPLETED status
in the service's cache, ``tenantry facility jobs``) to the waiter returning.

  push  alice's daemon holds ``facility.job_changes`` open (``facility_push = true``,
        the default) and wakes its status poller on each change
  poll  ``facility_push = false``: the daemon's status poller asks the service
        (``facility.scheduler_status``) every poll_fast_s (0.3 s here), backing off
        1.5x per quiet poll up to poll_slow_s (5 s)

Also counted: the ``facility.scheduler_status`` requests the service answered in each
mode (the executor's polls). Needs root (Unix users, setpriv) and Slurm.

Usage:
  python bench/facility_push.py                      # short: 3 jobs per mode, 1 run
  python bench/facility_push.py --jobs 5 --runs 3 --json bench/results/facility_push.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.facility.conftest import User, running_facility
from tests.facility.test_facility_failover import replica_health


def configure(user: User, push: bool) -> None:
    cfg = user.state / "config.toml"
    cfg.write_text(f"facility_push = {'true' if push else 'false'}\n")
    os.chown(cfg, user.uid, user.gid)
    user.stop()
    user.start()


def one_job(user: User, sleep_s: float) -> float:
    script = user.work / "bench-push.sh"
    script.write_text(f"#!/bin/sh\nsleep {sleep_s}\n")
    os.chown(script, user.uid, user.gid)
    script.chmod(0o755)
    job = user.ok("submit", "--force", "-t", "2", script.name)["job"]["id"]
    waiter = subprocess.Popen(
        user.argv("wait", job, "--timeout", "120", "--json"),
        env=user.env(False),
        cwd=user.work,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = waiter.communicate(timeout=180)
    returned = time.time()
    assert waiter.returncode == 0, err
    assert json.loads(out)["job"]["state"] == "COMPLETED", out
    row = next(r for r in user.ok("facility", "jobs")["jobs"] if str(r["id"]) == job)
    return returned - float(row["observed_at"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=3, help="jobs per mode and run")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--json", default="", help="write the results here")
    args = ap.parse_args()
    load_start = os.getloadavg()
    results: dict[str, list[dict[str, Any]]] = {"push": [], "poll": []}
    with running_facility() as fac:
        alice = fac.users["tt-alice"]
        for run in range(args.runs):
            for mode in ("push", "poll"):
                configure(alice, mode == "push")
                before = replica_health(fac.socket)["served"].get("scheduler_status", 0)
                lat = [one_job(alice, 1.0 + (i % 3)) for i in range(args.jobs)]
                after = replica_health(fac.socket)["served"].get("scheduler_status", 0)
                results[mode].append(
                    {
                        "run": run,
                        "latency_s": lat,
                        "median_s": statistics.median(lat),
                        "scheduler_status_requests": after - before,
                    }
                )
                print(f"run {run} {mode}: median {statistics.median(lat):.3f} s, "
                      f"max {max(lat):.3f} s, executor polls {after - before}")  # fmt: skip
    load_end = os.getloadavg()
    summary = {
        mode: {
            "median_of_run_medians_s": statistics.median(r["median_s"] for r in rows),
            "max_s": max(max(r["latency_s"]) for r in rows),
            "scheduler_status_requests_median": statistics.median(
                r["scheduler_status_requests"] for r in rows
            ),
        }
        for mode, rows in results.items()
    }
    out = {"load_start": load_start, "load_end": load_end, "summary": summary, "runs": results}
    print(json.dumps({"load_start": load_start, "load_end": load_end, "summary": summary}))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
