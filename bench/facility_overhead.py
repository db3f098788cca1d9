"""What facility mode costs per request: the same ops on a user-mode daemon and on an executor.

Both daemons run on this machine with the local backend; the executor asks a
facility service (also local, same uid) for every decision and sends it every
event. Measured with a warm in-process client (no process start):

  commands.run ["true"]   as the human and as a (claimed) agent
  jobs.list               a cached read (the executor still asks for the decision)
  policy.check            what an agent's hook asks before ``ls -la`` (forwarded to the
                          service, or answered from the service's earlier answer the
                          executor keeps: ``facility/answers.py``)

Budgets are lifted (``replace_defaults = true``) so the agent is never limited;
the service sends its audit anchors to the system log, as an installed one does.
Each run starts fresh daemons; the table prints the median over runs of each
p50/p99, then each daemon's CPU per request while a mode's ops ran (from
/proc, with the children it reaped), and the load average before and after
(the machine is shared).

Usage: python bench/facility_overhead.py [--n 200] [--runs 3] [--json OUT]
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from _common import parser, pct
from tenantry.client.sync import Client
from tenantry.core.settings import load

AGENT = {"agent": "claude-code", "session": "bench", "host": "", "project": ""}
RUN = {"argv": ["true"], "cwd": "/tmp"}


def timed(fn: Callable[[], Any], n: int) -> dict[str, float]:
    fn()  # warm-up
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - t)
    return {"p50_ms": statistics.median(lat) * 1000, "p99_ms": pct(lat, 0.99) * 1000}


def cpu_s(pid: int) -> float:
    """CPU seconds of a process and of the children it reaped (``logger``, spawns)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def _new_files(directory: Path, count: int) -> list[Path]:
    directory.mkdir(parents=True)
    paths = [directory / f"f{i}.txt" for i in range(count)]
    for path in paths:
        path.write_text("x\n")
    return paths


def _head_check(path: Path, cwd: Path) -> dict[str, Any]:
    command = f"head -n 20 {path}"
    return {"action": "run_command", "command": command,
            "params": {"command": command, "cwd": str(cwd)}}  # fmt: skip


def _check_next(client: Client, files: Iterator[Path], cwd: Path) -> None:
    client.call("policy.check", _head_check(next(files), cwd))


def _run(client: Client) -> None:
    list(client.stream("commands.run", RUN))


def _listening(path: str, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"{path}: the process exited ({proc.returncode})")
        with socket.socket(socket.AF_UNIX) as s:
            try:
                s.connect(path)
                return
            except OSError:
                time.sleep(0.05)
    raise SystemExit(f"{path}: not listening in time")


def start_daemons(
    base: Path, backend: str = ""
) -> tuple[dict[str, dict[str, str]], list[subprocess.Popen[bytes]]]:
    """A facility service, a user-mode daemon and an executor (facility mode) with
    their state in ``base``, each listening; budgets lifted. The environments by
    name ("facility", "user mode", "facility mode") and the processes, in that
    order (``stop_daemons`` ends them). ``backend``: the two daemons' (default local)."""
    procs: list[subprocess.Popen[bytes]] = []
    budgets = base / "budgets.toml"
    budgets.write_text("replace_defaults = true\n")
    common = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX"))}
    common |= {"TENANTRY_BUDGETS_FILE": str(budgets),
               "TENANTRY_POLICY_FILE": str(base / "none.cedar")}  # fmt: skip
    own = {"TENANTRY_BACKEND": backend} if backend else {}
    fac_sock = str(base / "run" / "facility.sock")
    envs = {
        "facility": common
        | {
            "TENANTRY_STATE_DIR": str(base / "fac"),
            "TENANTRY_FACILITY_SOCKET": fac_sock,
            "TENANTRY_AUDIT_SYSLOG": "true",  # as `tenantry facility install` writes it
        },
        "user mode": common
        | own
        | {
            "TENANTRY_STATE_DIR": str(base / "u"),
            "TENANTRY_SOCKET": str(base / "u" / "sock"),
        },
        "facility mode": common
        | own
        | {
            "TENANTRY_STATE_DIR": str(base / "x"),
            "TENANTRY_SOCKET": str(base / "x" / "sock"),
            "TENANTRY_FACILITY_ADDRESS": fac_sock,
        },
    }
    try:
        for name in ("facility", "user mode", "facility mode"):
            argv = ["facility", "serve"] if name == "facility" else ["serve"]
            proc = subprocess.Popen(
                [sys.executable, "-m", "tenantry", *argv],
                env=envs[name], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            procs.append(proc)
            sock = fac_sock if name == "facility" else envs[name]["TENANTRY_SOCKET"]
            _listening(sock, proc, time.monotonic() + 60)
    except BaseException:
        stop_daemons(procs, base)
        raise
    return envs, procs


def stop_daemons(procs: list[subprocess.Popen[bytes]], base: Path) -> None:
    for proc in reversed(procs):
        proc.terminate()
        proc.wait(timeout=30)
    shutil.rmtree(base, ignore_errors=True)


def one_run(n: int) -> dict[str, dict[str, float]]:
    base = Path(tempfile.mkdtemp(prefix="tnt-facb-"))
    envs, procs = start_daemons(base)
    try:
        out: dict[str, dict[str, float]] = {}
        daemons = dict(
            zip(("facility service", "user-mode daemon", "executor"), procs, strict=True)
        )
        for mode in ("user mode", "facility mode"):
            before = {name: cpu_s(p.pid) for name, p in daemons.items()}
            settings = load(env=envs[mode])
            human = Client(settings, autostart=False, claims={})
            agent = Client(settings, autostart=False, claims=AGENT)
            for who, client in (("human", human), ("agent", agent)):
                out[f"{mode}: commands.run ({who})"] = timed(partial(_run, client), n)
            out[f"{mode}: jobs.list (agent)"] = timed(partial(agent.call, "jobs.list", {}), n)
            check = {"action": "run_command", "command": "ls -la",
                     "params": {"command": "ls -la", "cwd": str(base)}}  # fmt: skip
            out[f"{mode}: policy.check ls (agent)"] = timed(
                partial(agent.call, "policy.check", check), n
            )
            # each `head` names a file not asked about before: no earlier answer to keep
            files = iter(_new_files(base / "files" / mode.split()[0], n + 1))
            out[f"{mode}: policy.check head NEW (agent)"] = timed(
                partial(_check_next, agent, files, base), n
            )
            # CPU per request of each daemon, over this mode's 5 x (n + 1) requests
            per = 5 * (n + 1)
            out[f"{mode}: CPU ms per request"] = {
                name: (cpu_s(p.pid) - before[name]) * 1000 / per
                for name, p in daemons.items()
                if (name == "user-mode daemon") == (mode == "user mode")
            }
        return out
    finally:
        stop_daemons(procs, base)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=200, help="requests per op and mode, per run")
    ap.add_argument("--runs", type=int, default=3, help="fresh daemons per run; medians over runs")
    args = ap.parse_args()
    load_before = os.getloadavg()
    runs = [one_run(args.n) for _ in range(args.runs)]
    load_after = os.getloadavg()
    rows, cpu = [], []
    for name in runs[0]:
        if name.endswith("CPU ms per request"):
            for daemon in runs[0][name]:
                ms = statistics.median(r[name][daemon] for r in runs)
                cpu.append({"name": f"{name.split(':')[0]}: {daemon}", "cpu_ms": round(ms, 3)})
            continue
        rows.append({
            "name": name,
            "p50_ms": round(statistics.median(r[name]["p50_ms"] for r in runs), 3),
            "p99_ms": round(statistics.median(r[name]["p99_ms"] for r in runs), 3),
        })  # fmt: skip
    print(f"{'op':42} {'p50 ms':>8} {'p99 ms':>8}")
    for r in rows:
        print(f"{r['name']:42} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f}")
    print(f"{'CPU per request (ops above, reaped children included)':55} {'ms':>8}")
    for c in cpu:
        print(f"{c['name']:55} {c['cpu_ms']:8.2f}")
    print(f"n={args.n} runs={args.runs} load average before {load_before}, after {load_after}")
    if args.json:
        report = {
            "rows": rows,
            "cpu_per_request": cpu,
            "n": args.n,
            "runs": args.runs,
            "loadavg": [load_before, load_after],
        }
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
