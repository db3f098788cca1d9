"""What one agent hook call costs before each shell command, by hook mechanism.

Mechanisms, each run N times (median and 90th percentile of wall time; CPU of
the hook process and, with a daemon, of the daemon per call):

- **command hook** ``tenantry hook --agent claude-code``, the console script
  a project install writes (a process per call): with no daemon (the
  decision made locally: a redirect; an ordinary command, fail-open) and with
  a daemon, where the lean path (``agents.hook_fast``) hands the payload to
  the daemon's ``POST /v1/hook/claude-code`` and prints its answer; and the
  same hook as user and system installs write it, a script started without
  ``site`` (``python -I -S .../agents/hook_entry.py``);
- **in-process decision** the previous command hook, which parsed and decided
  in the hook process (``agents.hook.main``) and asked the daemon's policy;
- **http hook** Claude Code's ``"type": "http"`` (``hook_http``): the agent
  POSTs the payload to the daemon's loopback listener; no process starts. The
  POST is made here, as the agent's own process makes it, on a new connection
  per call (Node's agent may keep one alive: that would be cheaper).

For comparison, ``python -c pass`` (an interpreter start) and ``ls -la`` (what
a plain ``ls`` costs bare). Bounded: about 6 x N process starts.

    PYTHONPATH=src python bench/hook_latency.py [N]
    PYTHONPATH=src python bench/hook_latency.py N --sbatch   # needs Slurm (scripts/dev-slurm)

``--sbatch``: a plain ``sbatch`` that the daemon's hook submits itself (a
Slurm daemon, ``bypassPermissions``, a session that sent its environment),
answered through the http hook and through the lean command hook, beside the
bare ``sbatch`` of the same script; each call submits a real one-line job
(3 x N jobs). With ``hook_http`` a plain ``sbatch`` runs the http hook
alone (the fallback's ``if`` patterns name only arrays); the command hook row
is what an install with command hooks pays.

``PYTHONDONTWRITEBYTECODE`` is dropped from the hook's environment (with it
set, every call compiles the sources again, which no installed hook does).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import ROOT, bench_env, serve
from _common import child_cpu as _cpu

PAYLOAD = json.loads((ROOT / "tests/fixtures/hooks/claude-code/pretooluse-bash.json").read_text())
TICK = os.sysconf("SC_CLK_TCK")


def payload(command: str) -> str:
    p = dict(PAYLOAD)
    p["tool_input"] = {**p["tool_input"], "command": command}
    return json.dumps(p)


def hook_argv() -> list[str]:
    """What ``tenantry install`` writes: the console script beside this interpreter."""
    script = Path(sys.executable).parent / "tenantry"
    if script.exists():
        return [str(script), "hook", "--agent", "claude-code"]
    return [sys.executable, "-m", "tenantry", "hook", "--agent", "claude-code"]


# what a user or system install writes (agents/products/common.py: hook_argv)
SCRIPT = [sys.executable, "-I", "-S", str(ROOT / "src/tenantry/agents/hook_entry.py"), "hook",
          "--agent", "claude-code"]  # fmt: skip
IN_PROCESS = [
    sys.executable,
    "-c",
    "import sys; from tenantry.agents.hook import main; sys.exit(main('claude-code'))",
]


def proc_cpu(pid: int | None) -> float:
    """CPU seconds of process ``pid`` so far (0 when None)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _stats(times: list[float], cpus: list[float], daemon_s: float, n: int) -> dict[str, float]:
    times.sort()
    return {
        "wall_ms": statistics.median(times) * 1000,
        "p90_ms": times[int(0.9 * (n - 1))] * 1000,
        "cpu_ms": statistics.median(cpus) * 1000,
        "daemon_cpu_ms": daemon_s / n * 1000,
    }


def measure(
    env: dict[str, str],
    argv: list[str],
    command: str,
    n: int,
    daemon: int | None = None,
    make: Callable[[str], str] = payload,
) -> dict[str, float]:
    times, cpus = [], []
    d0 = proc_cpu(daemon)
    for _ in range(n):
        data = make(command)
        c0 = _cpu()
        t0 = time.perf_counter()
        subprocess.run(argv, input=data, capture_output=True, text=True, env=env, check=True,
                       timeout=30)  # fmt: skip
        times.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
    return _stats(times, cpus, proc_cpu(daemon) - d0, n)


def post(port: int, body: bytes) -> bytes:
    """One http hook call, as the agent's process makes it: a fresh loopback connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        head = f"POST /v1/hook/claude-code HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        s.sendall(head.encode() + body)
        out = b""
        while b"\r\n\r\n" not in out:
            out += s.recv(65536)
        top, _, rest = out.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":", 1)[1])
            for line in top.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(rest) < length:
            rest += s.recv(65536)
        if not top.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(top.decode())
        return rest


def measure_http(
    port: int, command: str, n: int, daemon: int, make: Callable[[str], str] = payload
) -> dict[str, float]:
    times, cpus = [], []
    d0 = proc_cpu(daemon)
    for _ in range(n):
        data = make(command).encode()
        c0 = time.process_time()
        t0 = time.perf_counter()
        post(port, data)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return _stats(times, cpus, proc_cpu(daemon) - d0, n)


def baseline(argv: list[str], n: int) -> dict[str, float]:
    times, cpus = [], []
    for _ in range(n):
        c0 = _cpu()
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
    return _stats(times, cpus, 0.0, n)


def row(name: str, r: dict[str, float]) -> None:
    daemon = f"  + daemon {r['daemon_cpu_ms']:5.1f} ms CPU" if r["daemon_cpu_ms"] else ""
    print(
        f"{name:46} {r['wall_ms']:6.1f} ms wall (p90 {r['p90_ms']:6.1f})"
        f"  {r['cpu_ms']:5.1f} ms CPU{daemon}"
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SESSION = "bench-sbatch"
JOB = "sbatch --parsable -J hook-bench -t 1 --mem 64M -o /dev/null job.sh"


def submitting(work: Path) -> Callable[[str], str]:
    """Payloads the hook submits: a fresh tool call each, in ``work``, bypassPermissions."""
    calls = iter(range(1_000_000))

    def make(command: str) -> str:
        k = next(calls)  # a job of its own each time (the same one twice is deduplicated)
        p = json.loads(payload(command.replace("hook-bench", f"hook-bench-{k}")))
        p.update(session_id=SESSION, cwd=str(work), permission_mode="bypassPermissions",
                 tool_use_id=f"toolu_bench_{os.getpid()}_{k}")  # fmt: skip
        return json.dumps(p)

    return make


def sbatch_rows(n: int, env: dict[str, str], argv: list[str], port: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="tnt-hook-sbatch-"))
    (work / "job.sh").write_text("#!/bin/sh\ntrue\n")
    # the session submits 3 x N jobs in about N seconds: more than the default budget's
    # 30 a minute (a sweep gone wrong), which would turn the hook's answer into a redirect
    budgets = work / "budgets.toml"
    budgets.write_text(f"[session.minute]\njobs = {10 * n}\n")
    env = {**env, "TENANTRY_BACKEND": "slurm", "TENANTRY_BUDGETS_FILE": str(budgets)}
    agent = {**env, "CLAUDECODE": "1", "CLAUDE_CODE_SESSION_ID": SESSION}
    make = submitting(work)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (start)")
    proc = serve(env)
    try:
        _wait_http(port)
        # the session's environment, which the hook's job gets (any Tenantry command sends it)
        subprocess.run([*argv[:-3], "run", "--", "true"], env=agent, cwd=work, check=True,
                       capture_output=True, timeout=60)  # fmt: skip
        answer = post(port, make(JOB).encode()).decode()
        if "Tenantry answered" not in answer:
            raise RuntimeError(f"the hook did not submit: {answer}")
        bare = JOB.split()
        for _ in range(3):
            subprocess.run(bare, cwd=work, check=True, capture_output=True)
        arms: dict[str, Callable[[int], None]] = {
            "sbatch, bare": lambda k: _run_bare(bare, k, work),
            "http hook, daemon up, sbatch (submitted)": lambda k: _post_submit(port, make),
            "command hook (lean), daemon up, sbatch (submitted)": lambda k: _hook_submit(
                agent, argv, work, make
            ),
        }
        samples: dict[str, tuple[list[float], list[float], list[float]]] = {
            name: ([], [], []) for name in arms
        }
        before = _jobs()
        for k in range(n):  # interleaved, each arm in turn, spaced as an agent's commands
            for name, call in arms.items():
                times, cpus, daemon = samples[name]
                c0, d0 = _cpu() + time.process_time(), proc_cpu(proc.pid)
                t0 = time.perf_counter()
                call(k)
                times.append(time.perf_counter() - t0)
                cpus.append(_cpu() + time.process_time() - c0)
                daemon.append(proc_cpu(proc.pid) - d0)
                time.sleep(0.2)
        for name, (times, cpus, daemon) in samples.items():
            row(name, _stats(times, cpus, sum(daemon), n))
        deadline, seen = time.monotonic() + 30, -1
        while time.monotonic() < deadline and seen != 2 * n:  # accounting lags a little
            time.sleep(1)
            seen = _jobs() - before
        print(f"jobs the hooks submitted: {seen} (of {2 * n} calls)")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(env["TENANTRY_STATE_DIR"], ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f} (end)")


def _run_bare(bare: list[str], k: int, work: Path) -> None:
    argv = [a.replace("hook-bench", f"hook-bench-b{k}") for a in bare]
    subprocess.run(argv, cwd=work, check=True, capture_output=True)


def _post_submit(port: int, make: Callable[[str], str]) -> None:
    answer = post(port, make(JOB).encode())
    if b"Tenantry answered" not in answer:
        raise RuntimeError(f"the http hook did not submit: {answer!r}")


def _hook_submit(
    env: dict[str, str], argv: list[str], work: Path, make: Callable[[str], str]
) -> None:
    out = subprocess.run(argv, input=make(JOB), capture_output=True, text=True, env=env,
                         cwd=work, check=True, timeout=30).stdout  # fmt: skip
    if "Tenantry answered" not in out:
        raise RuntimeError(f"the command hook did not submit: {out}")


def _jobs() -> int:
    """The jobs of the hooks' submissions Slurm accounts for (the bare ones are ``-b``)."""
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobName", "-S", "now-1days"],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    return sum(1 for name in out.split() if re.fullmatch(r"hook-bench-\d+", name))


def _wait_http(port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            post(port, payload("true").encode())
            return
        except (OSError, RuntimeError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 20
    env = bench_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    port = _free_port()
    env["TENANTRY_HOOK_HTTP"] = f"127.0.0.1:{port}"
    argv = hook_argv()
    if "--sbatch" in sys.argv:
        sbatch_rows(n, env, argv, port)
        return
    measure(env, argv, "true", 1)  # bytecode written
    measure(env, IN_PROCESS, "true", 1)
    measure(env, SCRIPT, "true", 1)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (start)")
    row("python -c pass (interpreter start)", baseline([sys.executable, "-c", "pass"], n))
    row("ls -la (a plain command, bare)", baseline(["ls", "-la", str(ROOT)], n))
    row("command hook, no daemon, squeue (redirected)", measure(env, argv, "squeue -u alice", n))
    row("command hook, no daemon, make (fail-open)", measure(env, argv, "make -j4", n))
    proc = serve(env)
    try:
        _wait_http(port)
        pid = proc.pid
        for name, cmd in (("ls", "ls -la"), ("squeue", "squeue -u alice")):
            row(f"command hook (lean), daemon up, {name}", measure(env, argv, cmd, n, pid))
            row(f"hook script (-I -S), daemon up, {name}", measure(env, SCRIPT, cmd, n, pid))
            row(f"in-process decision, daemon up, {name}", measure(env, IN_PROCESS, cmd, n, pid))
            row(f"http hook, daemon up, {name}", measure_http(port, cmd, n, pid))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        shutil.rmtree(env["TENANTRY_STATE_DIR"], ignore_errors=True)
    print(f"load average {os.getloadavg()[0]:.1f} (end)")


if __name__ == "__main__":
    main()
