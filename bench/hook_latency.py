"""Wall time of one `tenantry hook` call, as an agent pays it before each shell command.

Cases: no daemon (a redirect decided locally; an ordinary command, fail-open
path) and a running daemon (an ordinary command asks the daemon's policy; a
redirect is reported to telemetry). Each case runs N times; the median and
90th percentile are printed. Bounded: about 4 x N process starts.

    PYTHONPATH=src python bench/hook_latency.py [N]

``PYTHONDONTWRITEBYTECODE`` is dropped from the hook's environment (with it
set, every call compiles the sources again, which no installed hook does).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import ROOT, bench_env, serve
from _common import child_cpu as _cpu

PAYLOAD = json.loads((ROOT / "tests/fixtures/hooks/claude-code/pretooluse-bash.json").read_text())


def payload(command: str) -> str:
    p = dict(PAYLOAD)
    p["tool_input"] = {**p["tool_input"], "command": command}
    return json.dumps(p)


def measure(env: dict[str, str], command: str, n: int) -> tuple[float, float, float]:
    """(median wall ms, p90 wall ms, median CPU ms of the hook process)."""
    data = payload(command)
    times, cpus = [], []
    for _ in range(n):
        c0 = _cpu()
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "tenantry", "hook", "--agent", "claude-code"],
            input=data,
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=30,
        )
        times.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
    times.sort()
    return (
        statistics.median(times) * 1000,
        times[int(0.9 * (n - 1))] * 1000,
        statistics.median(cpus) * 1000,
    )


def baseline(n: int) -> tuple[float, float]:
    times, cpus = [], []
    for _ in range(n):
        c0 = _cpu()
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
    return statistics.median(times) * 1000, statistics.median(cpus) * 1000


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    env = bench_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    measure(env, "true", 1)  # bytecode written
    wall, cpu = baseline(n)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'python -c pass (interpreter start)':40} {wall:6.1f} ms wall  {cpu:6.1f} ms CPU")
    rows = [
        ("no daemon, squeue (redirected)", env, "squeue -u alice"),
        ("no daemon, make (fail-open)", env, "make -j4"),
    ]
    for name, e, cmd in rows:
        med, p90, cpu = measure(e, cmd, n)
        print(f"{name:40} {med:6.1f} ms wall  {cpu:6.1f} ms CPU  (p90 wall {p90:.1f} ms)")
    proc = serve(env)
    try:
        deadline = time.monotonic() + 30
        while not Path(env["TENANTRY_SOCKET"]).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        for name, cmd in (
            ("daemon up, make (policy asked)", "make -j4"),
            ("daemon up, squeue (redirect reported)", "squeue -u alice"),
        ):
            med, p90, cpu = measure(env, cmd, n)
            print(f"{name:40} {med:6.1f} ms wall  {cpu:6.1f} ms CPU  (p90 wall {p90:.1f} ms)")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(env["TENANTRY_STATE_DIR"], ignore_errors=True)


if __name__ == "__main__":
    main()
