"""Start-up costs an agent pays, each beside the interpreter's floor, in one run.

- floor: ``python3 -c pass`` and ``python3 -S -c pass`` (no site module),
- CLI cold start: ``tenantry --version`` (process start to exit),
- MCP: a new ``tenantry mcp`` process until its answer to ``initialize``,
  and until its answer to ``tools/list`` (from the cached answer after the first run),
- hook: CPU (user + system) of one ``tenantry hook --agent claude-code`` call
  that asks the running daemon's policy, beside a stdlib-only raw-socket
  client making the same ``policy.check`` request.

Each case runs N times (default 15); medians are printed as Markdown rows.

    PYTHONPATH=src python bench/startup.py [N]
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import bench_env, serve
from _common import child_cpu as _cpu
from tenantry.client.mcp_hello import after_initialize, initialize

PY = sys.executable
PAYLOAD = json.dumps(
    {
        "session_id": "bench",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": "make -j2"},
        "cwd": "/tmp",
    }
)
RAW_CLIENT = r"""
import json, os, socket, sys
p = json.loads(sys.stdin.read())
cmd = p["tool_input"]["command"]
body = json.dumps({"action": "run_command", "command": cmd,
                   "params": {"command": cmd, "cwd": p["cwd"]}}).encode()
claims = json.dumps({"agent": "claude-code", "session": p["session_id"], "host": "h",
                     "project": ""})
head = ("POST /v1/op/policy.check HTTP/1.1\r\nHost: localhost\r\n"
        "Content-Type: application/json\r\nConnection: close\r\n"
        f"X-Tenantry-Principal: {claims}\r\nContent-Length: {len(body)}\r\n\r\n")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ["TENANTRY_SOCKET"])
s.sendall(head.encode() + body)
out = b""
while True:
    d = s.recv(65536)
    if not d:
        break
    out += d
head, _, payload = out.partition(b"\r\n\r\n")
if b"chunked" not in head.lower():
    json.loads(payload)
"""


def run(argv: list[str], env: dict[str, str], n: int, stdin: str = "") -> tuple[float, float]:
    """(median wall ms, median CPU ms) of a process run to exit."""
    walls, cpus = [], []
    for _ in range(n):
        c0, t0 = _cpu(), time.perf_counter()
        subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=True)
        walls.append(time.perf_counter() - t0)
        cpus.append(_cpu() - c0)
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000


def mcp_first_answers(env: dict[str, str], n: int) -> tuple[float, float]:
    """(median ms to the initialize answer, median ms to the tools/list answer)."""
    init = initialize("bench")
    rest = after_initialize()
    t_init, t_list = [], []
    for _ in range(n):
        t0 = time.perf_counter()
        p = subprocess.Popen(
            [PY, "-m", "tenantry", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write((json.dumps(init) + "\n").encode())
        p.stdin.flush()
        p.stdout.readline()
        t_init.append(time.perf_counter() - t0)
        p.stdin.write("".join(json.dumps(m) + "\n" for m in rest).encode())
        p.stdin.flush()
        p.stdout.readline()
        t_list.append(time.perf_counter() - t0)
        p.stdin.close()
        p.wait(timeout=30)
    return statistics.median(t_init) * 1000, statistics.median(t_list) * 1000


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    env = bench_env(
        {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "TENANTRY_"))}
    )
    daemon = serve(env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the daemon answers
            probe = subprocess.run([PY, "-c", RAW_CLIENT], input=PAYLOAD, env=env, text=True)
            if probe.returncode == 0:
                break
            time.sleep(0.1)
        rows = [
            ("python3 -c pass", *run([PY, "-c", "pass"], env, n)),
            ("python3 -S -c pass", *run([PY, "-S", "-c", "pass"], env, n)),
            ("tenantry --version", *run([PY, "-m", "tenantry", "--version"], env, n)),
            (
                "raw-socket stdlib client (policy.check)",
                *run([PY, "-c", RAW_CLIENT], env, n, PAYLOAD),
            ),
            (
                "python3 -m tenantry hook --agent claude-code (policy.check)",
                *run([PY, "-m", "tenantry", "hook", "--agent", "claude-code"], env, n, PAYLOAD),
            ),
        ]
        script = Path(PY).parent / "tenantry"  # the console script agents' hooks run
        if script.exists():
            rows.append(
                (
                    "tenantry hook --agent claude-code (console script)",
                    *run([str(script), "hook", "--agent", "claude-code"], env, n, PAYLOAD),
                )
            )
        init_ms, list_ms = mcp_first_answers(env, n)
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=30)
    print(f"load average {os.getloadavg()[0]:.2f}, N={n}")
    print("| case | wall ms (median) | CPU ms (median) |\n|---|---|---|")
    for name, wall, cpu in rows:
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")
    print(f"| tenantry mcp: initialize answered | {init_ms:.1f} | |")
    print(f"| tenantry mcp: tools/list answered | {list_ms:.1f} | |")
    raw = rows[3][2]
    for name, _, cpu in rows[4:]:
        print(f"\n{name}: CPU {cpu / raw:.2f}x the raw client's")


if __name__ == "__main__":
    main()
