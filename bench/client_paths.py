"""The client side of the agent's path: cold CLI starts and ``find`` through the daemon.

    PYTHONPATH=src python bench/client_paths.py [--n 30] [--finds 300] [--out FILE]

Against a fresh daemon (local backend, its own state directory) on a small
indexed workspace, it measures, interleaved so load falls on each alike:

- ``python -c pass`` with the interpreter the CLI uses (and ``/usr/bin/python3``);
- cold ``tenantry run -- true`` and ``tenantry find WS --name '*.py'`` (a new
  process each, the daemon warm);
- ``index.find`` through the daemon from a warm client (one kept-alive
  connection), p50/p99 of single requests;
- the ``policy.check`` op the same way (a gated request: policy + audit).

Medians over ``--n`` starts; ratios to ``python -c pass`` of the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def timed(argv: list[str], env: dict[str, str], cwd: str) -> float:
    t0 = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n", type=int, default=30, help="cold starts per command")
    ap.add_argument("--finds", type=int, default=300, help="warm index.find requests")
    ap.add_argument("--out", help="also write the results as JSON here")
    args = ap.parse_args()
    from tenantry.client.sync import Client
    from tenantry.core.settings import load

    tmp = Path(tempfile.mkdtemp(prefix="tnt-client-bench-"))
    ws = tmp / "ws"
    for d in range(20):
        sub = ws / f"pkg{d}"
        sub.mkdir(parents=True)
        for f in range(25):
            (sub / f"m{f}.py").write_text(f"def f{f}():\n    return {d * f}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TENANTRY_", "CLAUDE"))}
    env.update(TENANTRY_STATE_DIR=str(tmp / "state"), TENANTRY_SOCKET=str(tmp / "state/sock"))
    load0 = os.getloadavg()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "tenantry", "serve", "--backend", "local"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        settings = load(env=env)
        client = Client(settings, autostart=False, claims={"agent": "human", "host": "bench"})
        deadline = time.monotonic() + 60
        while True:
            try:
                client.call("facility.info")
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.call("index.add", {"path": str(ws), "wait": True})
        tenantry = [sys.executable, "-m", "tenantry"]
        arms: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "tenantry run -- true": [*tenantry, "run", "--", "true"],
            "tenantry find": [*tenantry, "find", str(ws), "--name", "*.py"],
        }
        if os.path.exists("/usr/bin/python3"):
            arms["/usr/bin/python3 -c pass"] = ["/usr/bin/python3", "-c", "pass"]
        times: dict[str, list[float]] = {k: [] for k in arms}
        for _ in range(args.n):
            for name, argv in arms.items():
                times[name].append(timed(argv, env, str(ws)))
        finds: list[float] = []
        checks: list[float] = []
        for _ in range(args.finds):
            t0 = time.perf_counter()
            client.call("index.find", {"path": str(ws), "name": "*.py", "limit": 50})
            finds.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            client.call("policy.check", {"action": "run_command", "params": {"argv": ["true"]}})
            checks.append(time.perf_counter() - t0)
        client.close()
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(times["python -c pass"])
    out: dict[str, Any] = {
        "load_avg_before": round(load0[0], 2),
        "load_avg_after": round(os.getloadavg()[0], 2),
        "cold_ms_p50": {k: round(statistics.median(v) * 1e3, 1) for k, v in times.items()},
        "cold_x_python": {k: round(statistics.median(v) / base, 2) for k, v in times.items()},
        "find_via_daemon_ms": {
            "p50": round(pct(finds, 0.5) * 1e3, 3),
            "p99": round(pct(finds, 0.99) * 1e3, 3),
        },
        "policy_check_via_daemon_ms": {
            "p50": round(pct(checks, 0.5) * 1e3, 3),
            "p99": round(pct(checks, 0.99) * 1e3, 3),
        },
    }
    print(json.dumps(out, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
