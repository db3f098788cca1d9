"""The client side of the agent's path: cold CLI starts and ``find`` through the daemon.

    PYTHONPATH=src python bench/client_paths.py [--n 30] [--finds 300] [--out FILE]

Against a fresh daemon (local backend, its own state directory) on a small
indexed workspace, it measures, interleaved so load falls on each alike:

- ``python -c pass`` with the interpreter the CLI uses (and ``/usr/bin/python3``);
- cold ``tenantry --version`` (the CLI's own start), ``tenantry run -- true``
  and ``tenantry run --where lease -- true`` (in a directory outside the
  workspace), ``tenantry submit --force job.sh`` (an agent's ``sbatch`` where
  the hook redirects it) and ``tenantry find WS --name '*.py'`` (a new process
  each, the daemon warm), as
  ``python -m tenantry`` and, when the interpreter's directory holds one, as
  the installed ``tenantry`` script (what agents run; it skips ``runpy``);
- ``index.find`` through the daemon from a warm client (one kept-alive
  connection), p50/p99 of single requests;
- the ``policy.check`` op the same way (a gated request: policy + audit);
- the daemon's own CPU per ``commands.run true`` (its threads, not the
  command): from the warm client back to back, from it with 40 ms between
  commands (as cold starts space them), from cold ``tenantry run``s, and from
  the warm client in the indexed workspace's root (the daemon re-stats the
  tree a command ran in once it ends, in case it edited files).

Medians over ``--n`` starts; ratios to ``python -c pass`` of the same run; CPU
from the children's rusage. ``PYTHONDONTWRITEBYTECODE`` is dropped from the
children's environment (with it set, every start compiles the sources again)
and each arm runs once before the timed rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import small_workspace


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall s, CPU s) of one run of ``argv``."""
    c0 = child_cpu()
    t0 = time.perf_counter()
    subprocess.run(
        argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True
    )
    return time.perf_counter() - t0, child_cpu() - c0


def child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def proc_cpu(pid: int) -> float:
    """CPU seconds of process ``pid``'s own threads (not its children)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def daemon_cpu_ms(pid: int, n: int, one: Callable[[], object], gap: float = 0.0) -> float:
    """The daemon's CPU ms per call of ``one`` (its batched writes included)."""
    c0 = proc_cpu(pid)
    for _ in range(n):
        one()
        if gap:
            time.sleep(gap)
    time.sleep(0.3)  # the batched flushes (<= 50 ms) land before the reading
    return (proc_cpu(pid) - c0) / n * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n", type=int, default=30, help="cold starts per command")
    ap.add_argument("--finds", type=int, default=300, help="warm index.find requests")
    ap.add_argument("--daemon-n", type=int, default=100, help="commands per daemon-CPU arm")
    ap.add_argument("--out", help="also write the results as JSON here")
    args = ap.parse_args()
    from tenantry.client.sync import Client
    from tenantry.core.settings import load

    tmp = Path(tempfile.mkdtemp(prefix="tnt-client-bench-"))
    ws = tmp / "ws"
    small_workspace(ws)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TENANTRY_", "CLAUDE")) and k != "PYTHONDONTWRITEBYTECODE"
    }
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
        lease = ["run", "--where", "lease", "--", "true"]
        submit = ["submit", "--force", "job.sh"]  # --force: each one a new job, not dedup
        arms: dict[str, list[str]] = {
            "python -c pass": [sys.executable, "-c", "pass"],
            "tenantry --version": [*tenantry, "--version"],
            "tenantry run -- true": [*tenantry, "run", "--", "true"],
            "tenantry run --where lease -- true": [*tenantry, *lease],
            "tenantry submit": [*tenantry, *submit],
            "tenantry find": [*tenantry, "find", str(ws), "--name", "*.py"],
        }
        script = Path(sys.executable).with_name("tenantry")
        if script.exists():  # the installed entry point: what an agent's shell runs
            arms["tenantry run -- true (script)"] = [str(script), "run", "--", "true"]
            arms["tenantry run --where lease -- true (script)"] = [str(script), *lease]
            arms["tenantry submit (script)"] = [str(script), *submit]
            arms["tenantry find (script)"] = [str(script), "find", str(ws), "--name", "*.py"]
        if os.path.exists("/usr/bin/python3"):
            arms["/usr/bin/python3 -c pass"] = ["/usr/bin/python3", "-c", "pass"]
        # commands run outside the workspace: one that ends inside an indexed workspace
        # has the daemon re-stat that directory's tree (the index's freshness rule),
        # work that would land on the next arm's start (measured apart below)
        plain = str(tmp / "plain")
        os.mkdir(plain)
        Path(plain, "job.sh").write_text("#!/bin/sh\ntrue\n")
        for argv in arms.values():
            timed(argv, env, plain)  # bytecode written, caches warm
        times: dict[str, list[float]] = {k: [] for k in arms}
        cpus: dict[str, list[float]] = {k: [] for k in arms}
        for _ in range(args.n):
            for name, argv in arms.items():
                wall, cpu = timed(argv, env, plain)
                times[name].append(wall)
                cpus[name].append(cpu)
        finds: list[float] = []
        checks: list[float] = []
        for _ in range(args.finds):
            t0 = time.perf_counter()
            client.call("index.find", {"path": str(ws), "name": "*.py", "limit": 50})
            finds.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            client.call("policy.check", {"action": "run_command", "params": {"argv": ["true"]}})
            checks.append(time.perf_counter() - t0)
        run = {
            "argv": ["true"],
            "cwd": plain,
            "env": env,
            "timeout_s": None,
            "resources": {},
            "where": "auto",
            "idempotent": False,
        }

        def warm(where: str = plain) -> None:
            for _chunk in client.stream("commands.run", {**run, "cwd": where}):
                pass

        cold = arms["tenantry run -- true"]
        dn = args.daemon_n
        daemon_ms = {
            "warm client, back to back": daemon_cpu_ms(daemon.pid, dn, warm),
            "warm client, 40 ms apart": daemon_cpu_ms(daemon.pid, dn, warm, 0.04),
            "cold tenantry run": daemon_cpu_ms(
                daemon.pid, max(1, dn // 2), lambda: timed(cold, env, plain)
            ),
            "warm client, cwd = the indexed workspace": daemon_cpu_ms(
                daemon.pid, max(1, dn // 4), lambda: warm(str(ws))
            ),
        }
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
        "cold_cpu_ms_p50": {k: round(statistics.median(v) * 1e3, 1) for k, v in cpus.items()},
        "find_via_daemon_ms": {
            "p50": round(pct(finds, 0.5) * 1e3, 3),
            "p99": round(pct(finds, 0.99) * 1e3, 3),
        },
        "policy_check_via_daemon_ms": {
            "p50": round(pct(checks, 0.5) * 1e3, 3),
            "p99": round(pct(checks, 0.99) * 1e3, 3),
        },
        "daemon_cpu_ms_per_run_true": {k: round(v, 2) for k, v in daemon_ms.items()},
    }
    print(json.dumps(out, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
