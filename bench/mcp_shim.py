"""The MCP shim's own cost per ``run_command``: CPU of the ``tenantry mcp`` process alone.

    PYTHONPATH=src python bench/mcp_shim.py [--n 300] [--rounds 3]

A real ``tenantry mcp`` on pipes (as an agent starts it) and its daemon
(started on demand); after ``initialize``, ``--n`` ``tools/call run_command
["true"]`` one at a time. Per round: the shim process's CPU per call (from
``/proc``, its threads only: not the daemon, not the command) and the single
call's p50 wall time. ``PYTHONDONTWRITEBYTECODE`` is dropped.
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
from typing import IO, Any


def proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_round(n: int, env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(shim CPU ms per call, p50 wall ms of a call)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tenantry", "mcp"],
        env=env,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin: IO[bytes] = proc.stdin
    stdout: IO[bytes] = proc.stdout

    def ask(msg: dict[str, Any]) -> dict[str, Any] | None:
        stdin.write((json.dumps(msg) + "\n").encode())
        stdin.flush()
        if "id" not in msg:
            return None
        reply: dict[str, Any] = json.loads(stdout.readline())
        return reply

    hello = {"protocolVersion": "2025-06-18", "capabilities": {}}
    hello["clientInfo"] = {"name": "bench", "version": "1"}
    ask({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello})
    ask({"jsonrpc": "2.0", "method": "notifications/initialized"})
    call = {"name": "run_command", "arguments": {"argv": ["true"]}}
    walls: list[float] = []
    c0 = 0.0
    for i in range(n + 5):  # the first five warm the connection and the SDK
        if i == 5:
            c0 = proc_cpu(proc.pid)
        t0 = time.perf_counter()
        reply = ask({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call", "params": call})
        assert reply is not None and not reply["result"].get("isError"), reply
        if i >= 5:
            walls.append((time.perf_counter() - t0) * 1e3)
    cpu = (proc_cpu(proc.pid) - c0) / n * 1e3
    stdin.close()
    proc.wait(timeout=60)
    return cpu, statistics.median(walls)


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--n", type=int, default=300, help="run_command calls per round")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (a new shim each)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tnt-mcp-bench-"))
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("TENANTRY_", "CLAUDE")) and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(TENANTRY_STATE_DIR=str(tmp / "state"), TENANTRY_SOCKET=str(tmp / "state/sock"))
    load0 = os.getloadavg()[0]
    try:
        rounds = [one_round(args.n, env, str(tmp)) for _ in range(args.rounds)]
    finally:
        subprocess.run(
            [sys.executable, "-m", "tenantry", "stop"], env=env, capture_output=True, check=False
        )
        shutil.rmtree(tmp, ignore_errors=True)
    out = {
        "load_avg_before": round(load0, 2),
        "load_avg_after": round(os.getloadavg()[0], 2),
        "shim_cpu_ms_per_call": [round(c, 3) for c, _ in rounds],
        "single_p50_ms": [round(w, 2) for _, w in rounds],
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
