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

``PYTHONDONTWRITEBYTECODE`` is dropped from the hook's environment (with it
set, every call compiles the sources again, which no installed hook does).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
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
    env: dict[str, str], argv: list[str], command: str, n: int, daemon: int | None = None
) -> dict[str, float]:
    data = payload(command)
    times, cpus = [], []
    d0 = proc_cpu(daemon)
    for _ in range(n):
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


def measure_http(port: int, command: str, n: int, daemon: int) -> dict[str, float]:
    data = payload(command).encode()
    times, cpus = [], []
    d0 = proc_cpu(daemon)
    for _ in range(n):
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


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    env = bench_env()
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    port = _free_port()
    env["TENANTRY_HOOK_HTTP"] = f"127.0.0.1:{port}"
    argv = hook_argv()
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
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                post(port, payload("true").encode())
                break
            except (OSError, RuntimeError):
                time.sleep(0.1)
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
