"""Latency and throughput of trivial commands through Tenantry vs bare fork/exec.

Measured in one run on the same machine, against a fresh daemon:

  bare        subprocess.run(["true"]) in this process
  python      a cold `python -c pass` (the interpreter's own start cost)
  cli         a cold `tenantry run -- true` process per command
  daemon      a warm in-process client calling commands.run (no MCP)
  mcp         a warm MCP session over real stdio to `tenantry mcp`, tool run_command

Usage: python bench/gateway.py [--n 200] [--cli-n 60] [--json OUT]
"""

from __future__ import annotations

import asyncio
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

from mcp import Client, StdioServerParameters

from _common import parser, pct
from tenantry.client.sync import Client as TClient
from tenantry.core.settings import load


def summary(name: str, lat: list[float], wall: float) -> dict[str, Any]:
    return {
        "name": name,
        "n": len(lat),
        "p50_ms": round(statistics.median(lat) * 1000, 3),
        "p99_ms": round(pct(lat, 0.99) * 1000, 3),
        "per_s": round(len(lat) / wall, 1),
    }


def timed(fn: Any, n: int) -> tuple[list[float], float]:
    lat = []
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - t)
    return lat, time.perf_counter() - t0


async def mcp_bench(env: dict[str, str], n: int) -> tuple[list[float], float]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tenantry", "mcp"], env=env, cwd="/tmp"
    )
    async with Client(params) as client:
        await client.call_tool("run_command", {"argv": ["true"], "cwd": "/tmp"})  # warm-up
        lat = []
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            r = await client.call_tool("run_command", {"argv": ["true"], "cwd": "/tmp"})
            assert not r.is_error, r.content
            lat.append(time.perf_counter() - t)
        return lat, time.perf_counter() - t0


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--n", type=int, default=200, help="commands per warm method")
    ap.add_argument("--cli-n", type=int, default=60, help="cold CLI processes")
    args = ap.parse_args()

    state = tempfile.mkdtemp(prefix="tnt-bench-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX"))}
    env.update(TENANTRY_STATE_DIR=state, TENANTRY_SOCKET=str(Path(state) / "sock"))
    daemon = subprocess.Popen(
        [sys.executable, "-m", "tenantry", "serve"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tenantry = str(Path(sys.executable).with_name("tenantry"))
    try:
        client = TClient(load(env=env), autostart=False)
        deadline = time.monotonic() + 20
        while True:
            try:
                client.health()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

        results = []
        lat, wall = timed(lambda: subprocess.run(["true"], check=True), args.n)
        results.append(summary("bare fork/exec (subprocess.run)", lat, wall))
        lat, wall = timed(
            lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.cli_n
        )
        results.append(summary("cold python -c pass", lat, wall))
        lat, wall = timed(
            lambda: subprocess.run(
                [tenantry, "run", "--", "true"], env=env, check=True, cwd="/tmp"
            ),
            args.cli_n,
        )
        results.append(summary("cli: tenantry run -- true (cold process)", lat, wall))

        def via_daemon() -> None:
            list(client.stream("commands.run", {"argv": ["true"], "cwd": "/tmp"}))

        via_daemon()
        lat, wall = timed(via_daemon, args.n)
        results.append(summary("daemon: commands.run (warm client)", lat, wall))
        lat, wall = asyncio.run(mcp_bench(env, args.n))
        results.append(summary("mcp: run_command (warm stdio session)", lat, wall))
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)
        shutil.rmtree(state, ignore_errors=True)

    bare = results[0]["p50_ms"]
    print(f"{'method':45} {'n':>5} {'p50 ms':>8} {'p99 ms':>8} {'per s':>7} {'p50 - bare':>10}")
    for r in results:
        r["overhead_p50_ms"] = round(r["p50_ms"] - bare, 3)
        print(
            f"{r['name']:45} {r['n']:5d} {r['p50_ms']:8.2f} {r['p99_ms']:8.2f} "
            f"{r['per_s']:7.1f} {r['overhead_p50_ms']:10.2f}"
        )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "results": results,
                    "cpus": os.cpu_count(),
                    "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
