"""Benchmark: 1,000,000-job sacct and SWF inputs to the full HTML report.

    PYTHONPATH=src python bench/report.py [--jobs 1000000] [--runs 3] [--keep DIR]

Generates a paper-calibrated trace with ``tenantry simulate`` in both formats
(not timed), then times ``tenantry report INPUT --out report.html`` ``--runs``
times per format, each in a fresh process whose own CPU time and peak RSS come
from ``os.wait4``. Prints a JSON line per run and one with the medians per
format; bench/report.md records the numbers measured.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(argv: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MiB) of one child process (os.wait4: its own rusage)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    t = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise SystemExit(f"{argv} failed with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3, help="runs per format (median reported)")
    ap.add_argument("--keep", help="directory to keep the dump and reports in")
    args = ap.parse_args()
    # ~406 records per user over 90 days with the paper profile; round up past --jobs
    users = max(10, round(args.jobs / 400))
    work = Path(args.keep or tempfile.mkdtemp(prefix="tnt-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for fmt, name in (("sacct", "sacct.txt"), ("swf", "trace.swf")):
        dump = work / name
        if not dump.exists():
            t = time.perf_counter()
            argv = [py, "-m", "tenantry", "simulate", "--users", str(users), "--days", "90"]
            subprocess.run([*argv, "--format", fmt, "--out", str(dump)], check=True, env=env)
            print(json.dumps({"step": f"simulate {fmt}", "wall_s": round(time.perf_counter() - t)}))
        size_mb = dump.stat().st_size / 2**20
        runs = []
        for i in range(args.runs):
            out = work / f"report-{fmt}.html"
            load = os.getloadavg()[0]
            wall, cpu, peak = run([py, "-m", "tenantry", "report", str(dump), "--out", str(out)])
            row = {
                "step": f"report {fmt} run {i + 1}",
                "input_mib": round(size_mb, 1),
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                "peak_rss_mib": round(peak),
                "cpus": os.cpu_count(),
                "load_avg_1m_before": round(load, 2),
            }
            runs.append(row)
            print(json.dumps(row), flush=True)
        med = {
            k: statistics.median(float(r[k]) for r in runs)
            for k in ("wall_s", "cpu_s", "peak_rss_mib", "load_avg_1m_before")
        }
        records = json.loads(
            subprocess.run(
                [py, "-m", "tenantry", "report", str(dump), "--json"],
                check=True,
                env=env,
                capture_output=True,
                text=True,
            ).stdout
        )["inputs"][0]["records"]
        print(json.dumps({"step": f"median {fmt}", "records": records, **med}), flush=True)


if __name__ == "__main__":
    main()
