"""Short agent-like commands, run several ways on one machine.

    PYTHONPATH=src python bench/commands.py --n 2000 --n-slurm 100 --out bench/commands.json

Arms (each gets the same workload, at most 2 commands in flight, like an agent
running two tool calls at once):

- ``bare``: ``subprocess.run`` from 2 threads of this process (the floor).
- ``leases``: Tenantry's lease manager in-process, one 2-slot lease on the
  local backend (a pilot process), commands dispatched over its TCP link.
- ``leases-slurm``: the same with the lease as a job on the real Slurm.
- ``dask``: ``distributed.LocalCluster`` with 2 single-thread worker processes,
  each task running the command with ``subprocess.run``.
- ``parsl``: ``HighThroughputExecutor`` (2 workers) with a ``LocalProvider``,
  commands as bash apps.
- ``sbatch``: one ``sbatch --wait`` job per command on the real Slurm (a
  smaller ``--n-slurm``, since each costs a scheduling cycle).

Per arm: commands/s over the workload, p50/p99 submit-to-result latency of the
workload and of single ``true`` commands on an otherwise idle system, CPU per
command (this process tree, from rusage and /proc; Slurm jobs from sacct),
Slurm jobs submitted and controller RPCs (``sdiag`` message counts, deltas;
other users of the shared controller add noise).

Dask and Parsl are bench-only dependencies: ``pip install dask distributed parsl``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Any

WINDOW = 2
TICK = os.sysconf("SC_CLK_TCK")
# a real interpreter, not a version-manager shim (those cost a bash script per call)
PYTHON = next(
    (x for x in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(x)), sys.executable
)
# processes outside our tree that work for an arm (Parsl daemonizes its pool)
MARKERS = ("process_worker_pool", "interchange.py")

ONE_LINERS = [
    "print(1 + 1)",
    "import sys; print(sys.version_info[:2])",
    "import json; print(json.dumps({'ok': True}))",
    "import os; print(len(os.listdir('.')))",
    "print(sum(range(10000)))",
]


# -- workload -------------------------------------------------------------------------


def workload(n: int, data: Path) -> list[list[str]]:
    """``true``, ``python -c`` one-liners and small file reads, interleaved."""
    data.mkdir(parents=True, exist_ok=True)
    files = []
    for i in range(20):
        f = data / f"f{i}.txt"
        f.write_text("".join(f"line {j} of file {i}\n" for j in range(40 + 10 * i)))
        files.append(str(f))
    cmds: list[list[str]] = []
    for i in range(n):
        kind = i % 3
        f = files[i % len(files)]
        if kind == 0:
            cmds.append(["true"])
        elif kind == 1:
            cmds.append([PYTHON, "-c", ONE_LINERS[i % len(ONE_LINERS)]])
        else:
            cmds.append([["cat", f], ["head", "-n", "5", f], ["wc", "-l", f]][i % 3])
    return cmds


# -- measurements ---------------------------------------------------------------------


def _proc_stat(pid: int) -> tuple[int, float] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    ppid = int(fields[1])
    ut, st, cut, cst = (int(x) for x in fields[11:15])
    return ppid, (ut + st + cut + cst) / TICK


def tree_cpu() -> float:
    """CPU seconds of this process, its reaped children and all live descendants."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
    kids: dict[int, list[tuple[int, float]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _proc_stat(int(entry))
            if st is not None:
                kids.setdefault(st[0], []).append((int(entry), st[1]))
    seen: set[int] = set()
    todo = [os.getpid()]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if any(m.encode() in cmdline for m in MARKERS):
                st = _proc_stat(int(entry))
                if st is not None:
                    total += st[1]
                    seen.add(int(entry))
                    todo.append(int(entry))
    while todo:
        for pid, cpu in kids.get(todo.pop(), []):
            if pid not in seen:
                seen.add(pid)
                total += cpu
                todo.append(pid)
    return total


def slurm_daemon_cpu() -> float:
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            comm = Path(f"/proc/{entry}/comm").read_text().strip()
        except OSError:
            continue
        if comm in {"slurmctld", "slurmd", "slurmdbd"}:
            st = _proc_stat(int(entry))
            total += st[1] if st else 0.0
    return total


def slurm_up() -> bool:
    if shutil.which("sinfo") is None:
        return False
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=15
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


def sdiag_rpcs() -> int | None:
    """Total controller RPCs by message type (``sdiag``), or None without Slurm."""
    try:
        out = subprocess.run(["sdiag"], capture_output=True, text=True, timeout=15).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    section = out.split("by message type", 1)[-1].split("by user", 1)[0]
    counts = [int(x) for x in re.findall(r"count:(\d+)", section)]
    return sum(counts) if counts else None


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


# -- the arms -------------------------------------------------------------------------

Runner = Callable[[list[str]], Awaitable[int]]


async def windowed(cmds: list[list[str]], run: Runner) -> tuple[list[float], float, int]:
    """Run ``cmds`` with at most WINDOW in flight; latencies, wall time, failures."""
    sem = asyncio.Semaphore(WINDOW)
    lat: list[float] = []
    bad = 0

    async def one(argv: list[str]) -> None:
        nonlocal bad
        async with sem:
            t0 = time.perf_counter()
            code = await run(argv)
            lat.append(time.perf_counter() - t0)
            bad += code != 0

    t0 = time.perf_counter()
    await asyncio.gather(*(one(c) for c in cmds))
    return lat, time.perf_counter() - t0, bad


async def singles(run: Runner, k: int) -> list[float]:
    out = []
    for _ in range(k):
        t0 = time.perf_counter()
        await run(["true"])
        out.append(time.perf_counter() - t0)
    return out


def _bare_task(argv: list[str]) -> int:
    return subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL).returncode


def bare_arm(cmds: list[list[str]], k: int) -> dict[str, Any]:
    """``subprocess.run`` from 2 threads: the floor every other arm is compared to."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(WINDOW) as pool:

        def submit(argv: list[str]) -> Future[int]:
            return pool.submit(_bare_task, argv)

        return _sync_measure("bare", cmds, k, submit, 0.0, _cf_first)


class LeaseArm:
    def __init__(self, backend_kind: str, state: Path) -> None:
        self.kind = backend_kind
        self.state = state
        self.mgr: Any = None
        self.backend: Any = None
        self.start_s = 0.0

    async def open(self) -> None:
        from tenantry.leases.manager import LeaseManager
        from tenantry.leases.model import LeaseConfig
        from tenantry.models import AgentProduct, Principal
        from tenantry.settings import load

        settings = load(env={}, overrides={"state_dir": str(self.state)})
        if self.kind == "slurm":
            self.backend = _slurm_backend()
        else:
            from tenantry.backends.local import LocalBackend

            self.backend = LocalBackend(str(self.state), slots=4)
        await self.backend.start()
        cfg = LeaseConfig.from_settings(
            settings, slots=WINDOW, max_per_session=1, idle_s=600, start_timeout_s=600
        )
        self.mgr = LeaseManager(settings, self.backend, None, cfg)
        await self.mgr.start()
        self.who = Principal(
            uid=os.getuid(), user="bench", agent=AgentProduct.CLAUDE_CODE, session="bench"
        )
        t0 = time.perf_counter()
        await self.run(["true"])
        self.start_s = time.perf_counter() - t0

    async def run(self, argv: list[str]) -> int:
        from tenantry.models import CommandSpec

        async def sink(stream: str, data: bytes) -> None:
            return None

        r = await self.mgr.run(CommandSpec(argv=tuple(argv), cwd=os.getcwd()), self.who, sink)
        return r.exit_code if r.exit_code is not None else 255

    async def close(self) -> None:
        await self.mgr.release_all("bench over")
        deadline = time.monotonic() + 30
        while self.mgr.leases() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await self.mgr.aclose()
        await self.backend.aclose()


def _slurm_backend() -> Any:
    try:
        from tenantry.backends.slurm import SlurmBackend  # type: ignore[attr-defined]

        return SlurmBackend()
    except (ImportError, TypeError):
        import importlib.util

        path = Path(__file__).resolve().parent.parent / "tests" / "leases" / "sbatch_backend.py"
        spec = importlib.util.spec_from_file_location("bench_sbatch_backend", path)
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.SbatchBackend()


def _dask_task(argv: list[str]) -> int:
    return subprocess.run(argv, capture_output=True, check=False).returncode


def sync_windowed(
    cmds: list[list[str]], submit: Callable[[list[str]], Any], first: Callable[[list[Any]], Any]
) -> tuple[list[float], float, int]:
    lat: list[float] = []
    bad = 0
    inflight: dict[Future[Any], float] = {}
    it = iter(cmds)
    t0 = time.perf_counter()
    done_all = False
    while True:
        while not done_all and len(inflight) < WINDOW:
            argv = next(it, None)
            if argv is None:
                done_all = True
                break
            inflight[submit(argv)] = time.perf_counter()
        if not inflight:
            break
        done, _ = first(list(inflight))
        now = time.perf_counter()
        for f in done:
            lat.append(now - inflight.pop(f))
            try:
                bad += f.result() != 0
            except Exception:
                bad += 1
    return lat, time.perf_counter() - t0, bad


def dask_arm(cmds: list[list[str]], k: int) -> dict[str, Any]:
    from distributed import Client, LocalCluster
    from distributed import wait as dask_wait

    t0 = time.perf_counter()
    cluster = LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)
    client.submit(_dask_task, ["true"], pure=False).result()
    start_s = time.perf_counter() - t0

    def submit(argv: list[str]) -> Any:
        return client.submit(_dask_task, argv, pure=False)

    def first(fs: list[Any]) -> Any:
        return dask_wait(fs, return_when="FIRST_COMPLETED")

    try:
        return _sync_measure("dask", cmds, k, submit, start_s, first)
    finally:
        client.close()
        cluster.close()


def parsl_arm(cmds: list[list[str]], k: int, run_dir: Path) -> dict[str, Any]:
    import parsl
    from parsl.app.app import bash_app
    from parsl.config import Config
    from parsl.executors import HighThroughputExecutor
    from parsl.providers import LocalProvider

    # Parsl starts interchange.py / process_worker_pool.py from PATH
    os.environ["PATH"] = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    t0 = time.perf_counter()
    cfg = Config(
        executors=[
            HighThroughputExecutor(
                label="htex",
                address="127.0.0.1",
                max_workers_per_node=2,
                provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1),
                worker_logdir_root=str(run_dir),
            )
        ],
        run_dir=str(run_dir),
        strategy="none",
        usage_tracking=0,
    )
    parsl.load(cfg)
    out = run_dir / "out"
    out.mkdir(parents=True, exist_ok=True)
    counter = iter(range(10**9))

    @bash_app
    def sh(command: str, stdout: str = "", stderr: str = "") -> str:
        return command

    def submit(argv: list[str]) -> Future[Any]:
        n = next(counter)
        return sh(shlex.join(argv), stdout=str(out / f"{n}.out"), stderr=str(out / f"{n}.err"))

    submit(["true"]).result()
    start_s = time.perf_counter() - t0
    try:
        return _sync_measure("parsl", cmds, k, submit, start_s, _cf_first)
    finally:
        parsl.dfk().cleanup()
        parsl.clear()


def _cf_first(fs: list[Future[Any]]) -> Any:
    return wait(fs, return_when=FIRST_COMPLETED)


def _sync_measure(
    name: str,
    cmds: list[list[str]],
    k: int,
    submit: Callable[[list[str]], Any],
    start_s: float,
    first: Callable[[list[Any]], Any],
) -> dict[str, Any]:
    single = []
    for _ in range(k):
        t0 = time.perf_counter()
        submit(["true"]).result()
        single.append(time.perf_counter() - t0)
    cpu0, rpc0 = tree_cpu(), sdiag_rpcs()
    lat, wall, bad = sync_windowed(cmds, submit, first)
    cpu1, rpc1 = tree_cpu(), sdiag_rpcs()
    return summarize(name, lat, wall, bad, single, cpu1 - cpu0, 0, rpc0, rpc1, start_s)


def summarize(
    name: str,
    lat: list[float],
    wall: float,
    bad: int,
    single: list[float],
    cpu: float,
    jobs: int,
    rpc0: int | None,
    rpc1: int | None,
    start_s: float = 0.0,
    **extra: Any,
) -> dict[str, Any]:
    n = len(lat)
    return {
        "arm": name,
        "n": n,
        "failed": bad,
        "wall_s": round(wall, 3),
        "commands_per_s": round(n / wall, 1) if wall else None,
        "p50_ms": round(pct(lat, 0.5) * 1e3, 2),
        "p99_ms": round(pct(lat, 0.99) * 1e3, 2),
        "single_p50_ms": round(pct(single, 0.5) * 1e3, 2),
        "single_p99_ms": round(pct(single, 0.99) * 1e3, 2),
        "cpu_ms_per_command": round(cpu / n * 1e3, 2) if n else None,
        "slurm_jobs": jobs,
        "sdiag_rpcs": (rpc1 - rpc0) if rpc0 is not None and rpc1 is not None else None,
        "startup_s": round(start_s, 3),
        **extra,
    }


async def async_arm(
    name: str, cmds: list[list[str]], k: int, run: Runner, jobs: int = 0, start_s: float = 0.0
) -> dict[str, Any]:
    single = await singles(run, k)
    cpu0, rpc0, d0 = tree_cpu(), sdiag_rpcs(), slurm_daemon_cpu()
    lat, wall, bad = await windowed(cmds, run)
    cpu1, rpc1, d1 = tree_cpu(), sdiag_rpcs(), slurm_daemon_cpu()
    return summarize(
        name,
        lat,
        wall,
        bad,
        single,
        cpu1 - cpu0,
        jobs,
        rpc0,
        rpc1,
        start_s,
        slurm_daemons_cpu_s=round(d1 - d0, 3),
    )


async def sbatch_arm(cmds: list[list[str]], k: int, tmp: Path) -> dict[str, Any]:
    ids: list[str] = []

    async def run(argv: list[str]) -> int:
        script = f"#!/bin/sh\nexec {shlex.join(argv)}\n"
        proc = await asyncio.create_subprocess_exec(
            "sbatch",
            "--parsable",
            "--wait",
            "--job-name=bench-cmd",
            "--time=1",
            f"--chdir={os.getcwd()}",
            f"--output={tmp}/%j.out",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, _ = await proc.communicate(script.encode())
        if out.strip():
            ids.append(out.decode().strip().split(";")[0])
        return proc.returncode or 0

    res = await async_arm("sbatch", cmds, k, run)
    res["slurm_jobs"] = len(ids)
    res["job_cpu_ms_per_command"] = round(sacct_cpu(ids) / max(1, len(ids)) * 1e3, 2)
    return res


def sacct_cpu(ids: list[str]) -> float:
    total = 0.0
    for i in range(0, len(ids), 200):
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-o", "TotalCPU", "-j", ",".join(ids[i : i + 200])],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        for line in out.split():
            parts = [float(x) for x in re.split(r"[:]", line.split("-")[-1]) if x]
            secs = 0.0
            for part in parts:
                secs = secs * 60 + part
            total += secs
    return total


# -- main -----------------------------------------------------------------------------


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    tmp = Path(tempfile.mkdtemp(prefix="tnt-bench-"))
    cmds = workload(args.n, tmp / "data")
    os.chdir(tmp / "data")
    k = args.singles
    arms = set(args.arms.split(","))
    have_slurm = slurm_up()
    results = []

    def show(r: dict[str, Any]) -> None:
        results.append(r)
        print(json.dumps(r), file=sys.stderr, flush=True)

    if "bare" in arms:
        show(await asyncio.to_thread(bare_arm, cmds, k))
    if "leases" in arms:
        arm = LeaseArm("local", tmp / "state-local")
        await arm.open()
        try:
            show(await async_arm("leases", cmds, k, arm.run, start_s=arm.start_s))
        finally:
            await arm.close()
    if "leases-slurm" in arms and have_slurm:
        arm = LeaseArm("slurm", tmp / "state-slurm")
        rpc0 = sdiag_rpcs()
        await arm.open()
        try:
            r = await async_arm("leases-slurm", cmds, k, arm.run, jobs=1, start_s=arm.start_s)
        finally:
            await arm.close()
        rpc1 = sdiag_rpcs()
        r["sdiag_rpcs_incl_lease_start"] = (rpc1 - rpc0) if rpc0 is not None and rpc1 else None
        show(r)
    if "dask" in arms:
        show(await asyncio.to_thread(dask_arm, cmds, k))
    if "parsl" in arms:
        show(await asyncio.to_thread(parsl_arm, cmds, k, tmp / "parsl"))
    if "sbatch" in arms and have_slurm:
        show(await sbatch_arm(cmds[: args.n_slurm], min(k, args.singles_slurm), tmp / "sbatch"))
    elif "sbatch" in arms:
        print("no Slurm is up: skipping the sbatch arm", file=sys.stderr)
    return results


def table(results: list[dict[str, Any]]) -> str:
    cols = [
        "arm",
        "n",
        "commands_per_s",
        "p50_ms",
        "p99_ms",
        "single_p50_ms",
        "single_p99_ms",
        "cpu_ms_per_command",
        "slurm_jobs",
        "sdiag_rpcs",
    ]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in results:
        lines.append("| " + " | ".join(str(r.get(c)) for c in cols) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="commands per arm (default 2000)")
    ap.add_argument("--n-slurm", type=int, default=100, help="commands for the sbatch arm")
    ap.add_argument("--singles", type=int, default=200, help="single-command latency samples")
    ap.add_argument("--singles-slurm", type=int, default=5, help="samples for the sbatch arm")
    ap.add_argument("--arms", default="bare,leases,leases-slurm,dask,parsl,sbatch")
    ap.add_argument("--out", help="also write the results as JSON here")
    args = ap.parse_args()
    if args.out:
        args.out = str(Path(args.out).resolve())
    results = asyncio.run(main_async(args))
    print(table(results))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
