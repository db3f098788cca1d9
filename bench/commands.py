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
- ``spawn``: ``os.posix_spawn`` + ``waitpid``, one command after another, output
  to pipes (the limit every ratio is taken against).
- ``pilot``: a reference pilot of ~70 lines (``bench/ref_pilot.py``): an asyncio
  process on a Unix socket, JSON lines, 2 slots.
- ``daemon-local`` / ``daemon-lease``: through a real ``tenantry serve`` on its
  socket, the agent's path (``commands.run`` with ``where=local`` / ``lease``;
  policy, audit, journal, guard), from the warm asyncio client the MCP shim uses.
- ``mcp``: ``run_command`` through a real ``tenantry mcp`` stdio shim.
- ``hyperqueue``: HyperQueue's Python API (``pip install hyperqueue``: a local
  server and one 2-core worker in-process), one job per command. Its client is
  not thread-safe, so calls go one at a time: latency-bound, not its best
  throughput (it is built for many tasks per job).

``--workload true`` runs only ``true`` (the peer-benchmark definition: what
is measured is each system's per-command cost, not the commands').

Per arm: commands/s over the workload with 2 in flight (closed loop, bound
by latency) and with everything submitted at once (``burst``: each system's
own queue feeds its 2 executors; Tenantry sends up to 2 commands ahead to the
pilot), p50/p99 submit-to-result latency of the
workload and of single ``true`` commands on an otherwise idle system, CPU per
command (this process and the processes each arm started: pilot, workers,
interchange; from rusage and /proc, so a pilot under slurmstepd counts too;
the sbatch arm's jobs from sacct),
Slurm jobs submitted and controller RPCs (``sdiag`` message counts, deltas;
other users of the shared controller add noise).

Dask and Parsl are bench-only dependencies: ``pip install dask distributed parsl``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.slurm_probe import slurm_up  # a controller answers and a node is usable

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


def workload(n: int, data: Path, kind: str = "mixed") -> list[list[str]]:
    """``true``, ``python -c`` one-liners and small file reads, interleaved (or only ``true``)."""
    data.mkdir(parents=True, exist_ok=True)
    if kind == "true":
        return [["true"] for _ in range(n)]
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


def _children_map() -> dict[int, list[tuple[int, float]]]:
    kids: dict[int, list[tuple[int, float]]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _proc_stat(int(entry))
            if st is not None:
                kids.setdefault(st[0], []).append((int(entry), st[1]))
    return kids


def _markers() -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if any(m.encode() in cmdline for m in MARKERS):
                found.add(int(entry))
    return found


def descendants(root: int) -> set[int]:
    kids = _children_map()
    out: set[int] = set()
    todo = [root]
    while todo:
        for pid, _ in kids.get(todo.pop(), []):
            if pid not in out:
                out.add(pid)
                todo.append(pid)
    return out


def roots_cpu(roots: set[int]) -> float:
    """CPU seconds of these processes and their live descendants (reaped ones included)."""
    kids = _children_map()
    total = 0.0
    seen: set[int] = set()
    todo = list(roots)
    for pid in roots:
        st = _proc_stat(pid)
        total += st[1] if st else 0.0
        seen.add(pid)
    while todo:
        for pid, cpu in kids.get(todo.pop(), []):
            if pid not in seen:
                seen.add(pid)
                total += cpu
                todo.append(pid)
    return total


def own_cpu() -> float:
    """This process plus its reaped children (where bare commands land)."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        total += ru.ru_utime + ru.ru_stime
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


Runner = Callable[[list[str]], Awaitable[int]]


# -- the arms -------------------------------------------------------------------------
#
# Every arm is an object with ``open()`` (returns its startup seconds), an async
# ``run(argv) -> exit code`` and ``close()``. All arms are opened first, then the
# workload runs in rounds that alternate between arms, so the load other users
# put on the shared machine falls on every arm alike.


async def windowed(
    cmds: list[list[str]], run: Runner, window: int = WINDOW
) -> tuple[list[float], float, int]:
    """Run ``cmds`` with at most ``window`` in flight; latencies, wall time, failures."""
    sem = asyncio.Semaphore(window)
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


def _bare_task(argv: list[str]) -> int:
    return subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL).returncode


class BareArm:
    """``subprocess.run`` on 2 threads: the floor every other arm is compared to."""

    name = "bare"

    async def open(self) -> float:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(WINDOW)
        return 0.0

    async def run(self, argv: list[str]) -> int:
        return await asyncio.get_running_loop().run_in_executor(self.pool, _bare_task, argv)

    async def close(self) -> None:
        self.pool.shutdown()


class LeaseArm:
    """Tenantry's lease manager in-process; one lease with 2 slots."""

    def __init__(self, backend_kind: str, state: Path) -> None:
        self.kind = backend_kind
        self.name = "leases" if backend_kind == "local" else "leases-slurm"
        self.state = state

    async def open(self) -> float:
        from tenantry.core.models import AgentProduct, CommandSpec, Principal
        from tenantry.core.settings import load
        from tenantry.leases.manager import LeaseManager
        from tenantry.leases.model import LeaseConfig

        self.spec = CommandSpec
        settings = load(env={}, overrides={"state_dir": str(self.state)})
        if self.kind == "slurm":
            self.backend = _slurm_backend(settings)
        else:
            from tenantry.backends.local import LocalBackend

            self.backend = LocalBackend(str(self.state), slots=4)
        await self.backend.start()
        cfg = LeaseConfig.from_settings(
            settings, slots=WINDOW, max_per_session=1, idle_s=3600, start_timeout_s=600
        )
        self.mgr = LeaseManager(settings, self.backend, None, cfg)
        await self.mgr.start()
        self.who = Principal(
            uid=os.getuid(), user="bench", agent=AgentProduct.CLAUDE_CODE, session="bench"
        )
        t0 = time.perf_counter()
        await self.run(["true"])
        return time.perf_counter() - t0

    async def run(self, argv: list[str]) -> int:
        async def sink(stream: str, data: bytes) -> None:
            return None

        r = await self.mgr.run(self.spec(argv=tuple(argv), cwd=os.getcwd()), self.who, sink)
        return r.exit_code if r.exit_code is not None else 255

    def jobs(self) -> list[str]:
        if self.kind == "local":
            return []  # local processes, not Slurm jobs
        return [x["backend_id"] for x in self.mgr.leases(include_ended=True)]

    def client_calls(self) -> dict[str, int]:
        return {str(k): int(v) for k, v in dict(self.backend.calls).items()}

    async def close(self) -> None:
        self.served = sum(x["served"] for x in self.mgr.leases(include_ended=True))
        await self.mgr.release_all("bench over")
        deadline = time.monotonic() + 30
        while self.mgr.leases() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await self.mgr.aclose()
        await self.backend.aclose()


class SpawnArm:
    """``os.posix_spawn`` + ``waitpid`` with piped output, strictly one after another."""

    name = "spawn"

    async def open(self) -> float:
        from concurrent.futures import ThreadPoolExecutor

        self.pool = ThreadPoolExecutor(1)  # sequential: the limit, with nothing around it
        return 0.0

    async def run(self, argv: list[str]) -> int:
        return await asyncio.get_running_loop().run_in_executor(self.pool, _spawn_one, argv)

    async def close(self) -> None:
        self.pool.shutdown()


def _spawn_one(argv: list[str]) -> int:
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    path = shutil.which(argv[0]) or argv[0]
    pid = os.posix_spawn(
        path,
        argv,
        os.environ,
        file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, out_w, 1),
            (os.POSIX_SPAWN_DUP2, err_w, 2),
        ],
    )
    os.close(out_w)
    os.close(err_w)
    for fd in (out_r, err_r):
        while os.read(fd, 65536):
            pass
        os.close(fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


class PilotArm:
    """The reference pilot (``bench/ref_pilot.py``): Unix socket, JSON lines, 2 slots."""

    name = "pilot"

    def __init__(self, state: Path) -> None:
        self.sock = state / "ref-pilot.sock"
        state.mkdir(parents=True, exist_ok=True)

    async def open(self) -> float:
        t0 = time.perf_counter()
        script = Path(__file__).with_name("ref_pilot.py")
        self.proc = await asyncio.create_subprocess_exec(
            PYTHON, str(script), str(self.sock), str(WINDOW)
        )
        while not self.sock.exists():
            await asyncio.sleep(0.01)
        self.reader, self.writer = await asyncio.open_unix_connection(str(self.sock))
        self.waiting: dict[int, asyncio.Future[int]] = {}
        self.ids = iter(range(10**9))
        self.pump = asyncio.create_task(self._pump())
        await self.run(["true"])
        return time.perf_counter() - t0

    async def _pump(self) -> None:
        while line := await self.reader.readline():
            msg = json.loads(line)
            self.waiting.pop(msg["id"]).set_result(msg["code"])

    async def run(self, argv: list[str]) -> int:
        n = next(self.ids)
        fut = self.waiting[n] = asyncio.get_running_loop().create_future()
        self.writer.write(json.dumps({"id": n, "argv": argv}).encode() + b"\n")
        return await fut

    async def close(self) -> None:
        self.writer.close()
        self.pump.cancel()
        with contextlib.suppress(ProcessLookupError):  # already gone
            self.proc.terminate()
        await self.proc.wait()


class DaemonArm:
    """A real ``tenantry serve`` (local backend); ``commands.run`` over its socket."""

    def __init__(self, where: str, state: Path) -> None:
        self.where = where
        self.name = f"daemon-{where}"
        self.state = state

    async def open(self) -> float:
        from tenantry.client.aio import AsyncClient
        from tenantry.client.sync import socket_answers
        from tenantry.core.settings import load

        self.state.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TENANTRY_", "CLAUDE"))}
        env.update(TENANTRY_STATE_DIR=str(self.state), TENANTRY_SOCKET=str(self.state / "sock"))
        # a lease as large as the others' executors: 2 slots
        env.update(TENANTRY_LEASE_SLOTS=str(WINDOW), TENANTRY_LOCAL_SLOTS="4")
        self.env = env
        t0 = time.perf_counter()
        log = (self.state / "daemon.log").open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tenantry", "serve", "--backend", "local",
            env=env, stdout=log, stderr=log,
        )  # fmt: skip
        self.settings = load(env=env)
        deadline = time.monotonic() + 60
        # wait for this daemon (a client call now would autostart another one)
        while not socket_answers(self.settings.socket):
            if time.monotonic() > deadline or self.proc.returncode is not None:
                raise RuntimeError(f"the daemon did not start: see {self.state}/daemon.log")
            await asyncio.sleep(0.05)
        self.client = AsyncClient(self.settings, claims={"agent": "human", "host": "bench"})
        self.cwd = os.getcwd()
        self.cmd_env = dict(os.environ)
        await self.run(["true"])
        return time.perf_counter() - t0

    async def run(self, argv: list[str]) -> int:
        params = {"argv": argv, "cwd": self.cwd, "where": self.where, "env": self.cmd_env}
        result: dict[str, Any] = {}
        async for chunk in self.client.stream("commands.run", params):
            if "result" in chunk:
                result = chunk["result"]
        code = result.get("exit_code")
        return code if isinstance(code, int) else 255

    async def close(self) -> None:
        await self.client.aclose()
        with contextlib.suppress(ProcessLookupError):  # already gone
            self.proc.terminate()
        await self.proc.wait()


class McpArm:
    """``run_command`` through a real ``tenantry mcp`` stdio shim (JSON-RPC on its pipes)."""

    name = "mcp"

    def __init__(self, state: Path) -> None:
        self.state = state

    async def open(self) -> float:
        self.state.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TENANTRY_", "CLAUDE"))}
        env.update(TENANTRY_STATE_DIR=str(self.state), TENANTRY_SOCKET=str(self.state / "sock"))
        self.env = env
        t0 = time.perf_counter()
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tenantry", "mcp", env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=1 << 22,
        )  # fmt: skip
        self.ids = iter(range(1, 10**9))
        self.waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.pump = asyncio.create_task(self._pump())
        await self._rpc("initialize", {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        })  # fmt: skip
        assert self.proc.stdin is not None
        self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.cwd = os.getcwd()
        await self.run(["true"])
        return time.perf_counter() - t0

    async def _pump(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            msg = json.loads(line)
            fut = self.waiting.pop(msg.get("id"), None)
            if fut is not None:
                fut.set_result(msg)

    async def _rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        n = next(self.ids)
        fut = self.waiting[n] = asyncio.get_running_loop().create_future()
        msg = {"jsonrpc": "2.0", "id": n, "method": method, "params": params}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
        return await fut

    async def run(self, argv: list[str]) -> int:
        reply = await self._rpc(
            "tools/call",
            {"name": "run_command", "arguments": {"argv": argv, "cwd": self.cwd, "where": "local"}},
        )
        result = reply.get("result") or {}
        if result.get("isError"):
            return 255
        code = (result.get("structuredContent") or {}).get("exit_code")
        return code if isinstance(code, int) else 255

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except TimeoutError:
            self.proc.kill()
        self.pump.cancel()
        # the shim started a daemon of its own on demand: stop it too
        stop = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tenantry", "stop", env=self.env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        await stop.wait()


class HyperQueueArm:
    """HyperQueue (``hq``): a local server and one worker with 2 CPUs; one task per command."""

    name = "hyperqueue"

    def __init__(self, state: Path) -> None:
        self.state = state

    async def open(self) -> float:
        from hyperqueue import Job
        from hyperqueue.cluster import LocalCluster, WorkerConfig

        t0 = time.perf_counter()
        self.Job = Job
        self.state.mkdir(parents=True, exist_ok=True)
        self.cluster = LocalCluster(server_dir=str(self.state))  # type: ignore[arg-type]
        self.cluster.start_worker(WorkerConfig(cores=WINDOW))
        self.client: Any = self.cluster.client()
        self.lock = threading.Lock()
        await self.run(["true"])
        return time.perf_counter() - t0

    async def run(self, argv: list[str]) -> int:
        def one() -> int:
            job = self.Job()
            job.program(argv)
            with self.lock:  # its Python client is not thread-safe: one call at a time
                sub = self.client.submit(job)
                ok = self.client.wait_for_jobs([sub], raise_on_error=False)
            return 0 if ok else 1

        return await asyncio.to_thread(one)

    async def close(self) -> None:
        self.cluster.stop()


def _slurm_backend(settings: Any) -> Any:
    from tenantry.backends.slurm import SlurmBackend

    return SlurmBackend(settings)


def _dask_task(argv: list[str]) -> int:
    return subprocess.run(argv, capture_output=True, check=False).returncode


class DaskArm:
    """``distributed.LocalCluster``: 2 single-thread worker processes."""

    name = "dask"

    async def open(self) -> float:
        from distributed import Client, LocalCluster

        t0 = time.perf_counter()
        self.cluster = await LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            asynchronous=True,
        )
        self.client = await Client(self.cluster, asynchronous=True)
        await self.run(["true"])
        return time.perf_counter() - t0

    async def run(self, argv: list[str]) -> int:
        code: int = await self.client.submit(_dask_task, argv, pure=False)
        return code

    async def close(self) -> None:
        await self.client.close()
        await self.cluster.close()


class ParslArm:
    """Parsl ``HighThroughputExecutor`` (2 workers, ``LocalProvider``), bash apps."""

    name = "parsl"

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    async def open(self) -> float:
        return await asyncio.to_thread(self._open)

    def _open(self) -> float:
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
                    max_workers_per_node=WINDOW,
                    provider=LocalProvider(init_blocks=1, min_blocks=1, max_blocks=1),
                    worker_logdir_root=str(self.run_dir),
                )
            ],
            run_dir=str(self.run_dir),
            strategy="none",
            usage_tracking=0,
        )
        parsl.load(cfg)
        self.out = self.run_dir / "out"
        self.out.mkdir(parents=True, exist_ok=True)
        self.counter = iter(range(10**9))

        @bash_app
        def sh(command: str, stdout: str = "", stderr: str = "") -> str:
            return command

        self.sh = sh
        self.sh("true", stdout=str(self.out / "w.out"), stderr=str(self.out / "w.err")).result()
        return time.perf_counter() - t0

    async def run(self, argv: list[str]) -> int:
        n = next(self.counter)
        fut = self.sh(
            shlex.join(argv), stdout=str(self.out / f"{n}.out"), stderr=str(self.out / f"{n}.err")
        )
        try:
            await asyncio.wrap_future(fut)
        except Exception:
            return 1
        return 0

    async def close(self) -> None:
        import parsl

        await asyncio.to_thread(parsl.dfk().cleanup)
        parsl.clear()


class SbatchArm:
    """One ``sbatch --wait`` job per command on the real Slurm."""

    name = "sbatch"

    def __init__(self, out_dir: Path) -> None:
        self.out_dir = out_dir
        self.ids: list[str] = []

    async def open(self) -> float:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        return 0.0

    async def run(self, argv: list[str]) -> int:
        script = f"#!/bin/sh\nexec {shlex.join(argv)}\n"
        proc = await asyncio.create_subprocess_exec(
            "sbatch", "--parsable", "--wait", "--job-name=bench-cmd", "--time=1",
            f"--chdir={os.getcwd()}", f"--output={self.out_dir}/%j.out",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, _ = await proc.communicate(script.encode())
        if out.strip():
            self.ids.append(out.decode().strip().split(";")[0])
        return proc.returncode or 0

    def jobs(self) -> list[str]:
        return self.ids

    async def close(self) -> None:
        return None


def sacct_cpu(ids: list[str]) -> float:
    """Total CPU seconds Slurm accounted to these jobs (job lines, not ``-X``)."""
    total = 0.0
    for i in range(0, len(ids), 200):
        out = subprocess.run(
            ["sacct", "-n", "-P", "-o", "JobID,TotalCPU", "-j", ",".join(ids[i : i + 200])],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
        for line in out.splitlines():
            jid, _, cpu = line.partition("|")
            if "." in jid or not cpu:
                continue  # steps are included in the job's line
            days, _, clock = cpu.rpartition("-")
            secs = 0.0
            for part in clock.split(":"):
                secs = secs * 60 + float(part or 0)
            total += secs + (float(days) * 86400 if days else 0.0)
    return total


# -- measurement loop -----------------------------------------------------------------


class Tally:
    def __init__(self, name: str) -> None:
        self.name = name
        self.lat: list[float] = []
        self.single: list[float] = []
        self.wall = 0.0
        self.bad = 0
        self.cpu = 0.0
        self.daemons_cpu = 0.0
        self.rpcs: int | None = 0
        self.startup = 0.0
        self.roots: set[int] = set()
        self.burst_n = 0
        self.burst_wall = 0.0
        self.burst_cpu = 0.0
        self.extra: dict[str, Any] = {}

    async def chunk(self, arm: Any, cmds: list[list[str]]) -> None:
        cpu0 = own_cpu() + roots_cpu(self.roots)
        rpc0, d0 = sdiag_rpcs(), slurm_daemon_cpu()
        lat, wall, bad = await windowed(cmds, arm.run)
        cpu1 = own_cpu() + roots_cpu(self.roots)
        rpc1, d1 = sdiag_rpcs(), slurm_daemon_cpu()
        self.lat += lat
        self.wall += wall
        self.bad += bad
        self.cpu += cpu1 - cpu0
        self.daemons_cpu += d1 - d0
        if self.rpcs is not None and rpc0 is not None and rpc1 is not None and rpc1 >= rpc0:
            self.rpcs += rpc1 - rpc0
        else:
            self.rpcs = None  # no Slurm, or its counters were reset meanwhile

    async def burst(self, arm: Any, cmds: list[list[str]]) -> None:
        """Everything submitted at once: throughput with 2-way execution parallelism."""
        cpu0 = own_cpu() + roots_cpu(self.roots)
        _, wall, bad = await windowed(cmds, arm.run, window=len(cmds))
        cpu1 = own_cpu() + roots_cpu(self.roots)
        self.burst_n += len(cmds)
        self.burst_wall += wall
        self.burst_cpu += cpu1 - cpu0
        self.bad += bad

    async def singles(self, arm: Any, k: int) -> None:
        for _ in range(k):
            t0 = time.perf_counter()
            await arm.run(["true"])
            self.single.append(time.perf_counter() - t0)

    def summary(self) -> dict[str, Any]:
        n = len(self.lat)
        return {
            "arm": self.name,
            "n": n,
            "failed": self.bad,
            "wall_s": round(self.wall, 3),
            "commands_per_s": round(n / self.wall, 1) if self.wall else None,
            "p50_ms": round(pct(self.lat, 0.5) * 1e3, 2),
            "p99_ms": round(pct(self.lat, 0.99) * 1e3, 2),
            "single_p50_ms": round(pct(self.single, 0.5) * 1e3, 2),
            "single_p99_ms": round(pct(self.single, 0.99) * 1e3, 2),
            "cpu_ms_per_command": round(self.cpu / n * 1e3, 2) if n else None,
            "burst_commands_per_s": (
                round(self.burst_n / self.burst_wall, 1) if self.burst_wall else None
            ),
            "burst_cpu_ms_per_command": (
                round(self.burst_cpu / self.burst_n * 1e3, 2) if self.burst_n else None
            ),
            "slurm_daemons_cpu_s": round(self.daemons_cpu, 3),
            "sdiag_rpcs": self.rpcs,
            "startup_s": round(self.startup, 3),
            **self.extra,
        }


def _ancestors(pid: int) -> set[int]:
    out = set()
    while pid > 1:
        st = _proc_stat(pid)
        if st is None:
            break
        pid = st[0]
        out.add(pid)
    return out


def arm_pids(arm: Any) -> set[int]:
    """Processes of an arm outside our tree (a pilot under slurmstepd)."""
    mgr = getattr(arm, "mgr", None)
    if mgr is None:
        return set()
    return {lv.lease.pid for lv in mgr._live.values() if lv.lease.pid}


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    tmp = args.tmp = Path(tempfile.mkdtemp(prefix="tnt-bench-"))  # removed when the run ends
    cmds = workload(args.n, tmp / "data", args.workload)
    os.chdir(tmp / "data")
    wanted = args.arms.split(",")
    have_slurm = slurm_up()
    makers: dict[str, Callable[[], Any]] = {
        "bare": BareArm,
        "leases": lambda: LeaseArm("local", tmp / "state-local"),
        "leases-slurm": lambda: LeaseArm("slurm", tmp / "state-slurm"),
        "dask": DaskArm,
        "parsl": lambda: ParslArm(tmp / "parsl"),
        "spawn": SpawnArm,
        "pilot": lambda: PilotArm(tmp / "pilot"),
        "daemon-local": lambda: DaemonArm("local", tmp / "d-local"),
        "daemon-lease": lambda: DaemonArm("lease", tmp / "d-lease"),
        "mcp": lambda: McpArm(tmp / "d-mcp"),
        "hyperqueue": lambda: HyperQueueArm(tmp / "hq"),
    }
    arms: list[Any] = []
    tallies: dict[str, Tally] = {}
    try:
        for name in wanted:
            if name not in makers:
                continue
            if name == "leases-slurm" and not have_slurm:
                print("no Slurm is up: skipping leases-slurm", file=sys.stderr)
                continue
            arm = makers[name]()
            before = descendants(os.getpid()) | _markers()
            try:
                startup = await arm.open()
            except ImportError as exc:
                print(f"skipping {name}: {exc}", file=sys.stderr)
                continue
            tally = tallies[name] = Tally(name)
            tally.startup = startup
            # the processes this arm started (pilot, workers), outside other arms' trees
            new = (descendants(os.getpid()) | _markers()) - before
            tally.roots = {p for p in new if not (_ancestors(p) & new)} | arm_pids(arm)
            arms.append(arm)
        for arm in arms:  # single commands on an otherwise idle system
            await tallies[arm.name].singles(arm, args.singles)
        rounds = max(1, args.rounds)
        size = -(-len(cmds) // rounds)
        for r in range(rounds):
            part = cmds[r * size : (r + 1) * size]
            order = arms if r % 2 == 0 else arms[::-1]
            for arm in order:
                await tallies[arm.name].chunk(arm, part)
            if args.burst:
                for arm in order:
                    await tallies[arm.name].burst(arm, part)
            print(f"round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    finally:
        for arm in arms:
            await arm.close()
    for arm in arms:
        t = tallies[arm.name]
        t.extra["slurm_jobs"] = len(arm.jobs()) if hasattr(arm, "jobs") else 0
        if arm.name == "leases-slurm":
            t.extra["slurm_client_calls"] = arm.client_calls()
            await asyncio.sleep(2)  # let accounting see the released lease job
            served = max(1, arm.served)  # workload twice (+ burst), singles, warm-up
            t.extra["job_cpu_ms_per_command"] = round(sacct_cpu(arm.jobs()) / served * 1e3, 2)
    results = [tallies[a.name].summary() for a in arms]
    if "sbatch" in wanted and have_slurm:
        arm = SbatchArm(tmp / "sbatch")
        t = Tally("sbatch")
        await arm.open()
        await t.singles(arm, args.singles_slurm)
        await t.chunk(arm, cmds[: args.n_slurm])
        t.extra["slurm_jobs"] = len(arm.jobs())
        t.extra["slurm_client_calls"] = {"sbatch --wait": len(arm.jobs())}
        t.extra["job_cpu_ms_per_command"] = round(
            sacct_cpu(arm.jobs()) / max(1, len(arm.jobs())) * 1e3, 2
        )
        results.append(t.summary())
    elif "sbatch" in wanted:
        print("no Slurm is up: skipping the sbatch arm", file=sys.stderr)
    return results


def add_ratios(results: list[dict[str, Any]], limit: str = "spawn") -> None:
    """Each arm's burst throughput and CPU per command as a ratio to the limit's (same run)."""
    base = next((r for r in results if r["arm"] == limit), None)
    if base is None:
        return
    for r in results:
        for key, src in (
            ("x_spawn_burst", "burst_commands_per_s"),
            ("x_spawn_closed", "commands_per_s"),
            ("x_spawn_cpu", "burst_cpu_ms_per_command"),
        ):
            a, b = r.get(src), base.get(src)
            r[key] = round(a / b, 3) if a and b else None


def table(results: list[dict[str, Any]]) -> str:
    cols = [
        "arm",
        "n",
        "x_spawn_burst",
        "x_spawn_cpu",
        "commands_per_s",
        "burst_commands_per_s",
        "burst_cpu_ms_per_command",
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
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="commands per arm (default 2000)")
    ap.add_argument("--n-slurm", type=int, default=100, help="commands for the sbatch arm")
    ap.add_argument("--singles", type=int, default=200, help="single-command latency samples")
    ap.add_argument("--singles-slurm", type=int, default=5, help="samples for the sbatch arm")
    ap.add_argument("--rounds", type=int, default=8, help="rounds alternating between arms")
    ap.add_argument(
        "--no-burst", dest="burst", action="store_false", help="skip the all-at-once phase"
    )
    ap.add_argument("--arms", default="bare,leases,leases-slurm,dask,parsl,sbatch")
    ap.add_argument(
        "--workload", choices=("mixed", "true"), default="mixed",
        help="mixed agent-like commands (default) or only `true` (per-command cost)",
    )  # fmt: skip
    ap.add_argument("--out", help="also write the results as JSON here")
    args = ap.parse_args()
    if args.out:
        args.out = str(Path(args.out).resolve())
    load0 = os.getloadavg()
    cwd = os.getcwd()
    try:
        results = asyncio.run(main_async(args))
    finally:
        os.chdir(cwd)
        if getattr(args, "tmp", None):
            shutil.rmtree(args.tmp, ignore_errors=True)
    add_ratios(results)
    load1 = os.getloadavg()
    print(table(results))
    print(
        f"load average: before {load0[0]:.2f} {load0[1]:.2f}, after {load1[0]:.2f} {load1[1]:.2f}"
    )
    for r in results:
        r["load_avg_before"], r["load_avg_after"] = round(load0[0], 2), round(load1[0], 2)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
