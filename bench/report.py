"""Benchmark: a 1,000,000-job sacct dump to the full report (all formats).

    PYTHONPATH=src python bench/report.py [--jobs 1000000] [--keep DIR]

Generates a paper-calibrated trace with ``tenantry simulate`` (not timed), then
times ``tenantry report DUMP --out report.html`` plus the Markdown, JSON and CSV
renderings, each in a fresh process whose own peak RSS comes from ``os.wait4``.
Prints a JSON line per run; bench/report.md records the numbers measured.
"""

from __future__ import annotations

import argparse
import json
import os
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
    ap.add_argument("--keep", help="directory to keep the dump and reports in")
    args = ap.parse_args()
    # ~406 records per user over 90 days with the paper profile; round up past --jobs
    users = max(10, round(args.jobs / 400))
    work = Path(args.keep or tempfile.mkdtemp(prefix="tnt-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    dump = work / "sacct.txt"
    py = sys.executable
    if not dump.exists():
        t = time.perf_counter()
        subprocess.run(
            [
                py,
                "-m",
                "tenantry",
                "simulate",
                "--users",
                str(users),
                "--days",
                "90",
                "--out",
                str(dump),
            ],
            check=True,
            env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
        print(json.dumps({"step": "simulate", "wall_s": round(time.perf_counter() - t, 1)}))
    records = sum(1 for _ in dump.open("rb")) - 1
    size_mb = dump.stat().st_size / 2**20
    for fmt in ("html", "md", "json", "csv"):
        out = work / f"report.{fmt}"
        load = os.getloadavg()[0]
        wall, cpu, peak = run([py, "-m", "tenantry", "report", str(dump), "--out", str(out)])
        print(
            json.dumps(
                {
                    "step": f"report --format {fmt}",
                    "records": records,
                    "dump_mib": round(size_mb, 1),
                    "wall_s": round(wall, 2),
                    "cpu_s": round(cpu, 2),
                    "peak_rss_mib": round(peak),
                    "cpus": os.cpu_count(),
                    "load_avg_1m_before": round(load, 2),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
