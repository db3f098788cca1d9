"""Controller RPCs with K agent sessions polling their jobs: straight squeue vs through Tenantry.

On the real single-node Slurm (scripts/dev-slurm), in one run:

  direct    K sessions, each runs `squeue -h -j <its job>` once per second, as
            agents do today
  tenantry  K sessions (each its own principal), each calls the daemon's
            `jobs.status` once per second over the Unix socket (what the MCP
            tool, `tenantry status` and the squeue shim use); one daemon with
            the slurm backend polls Slurm for all of them

Before each run the controller's RPC statistics are reset (`sdiag -r`, needs
root); after it they are read back (`sdiag`). Counted: every RPC type except
sdiag's own REQUEST_STATS_INFO; "job queries" are REQUEST_JOB_INFO(+_SINGLE).
Other users of the same Slurm add a little noise to both modes.

Usage: python bench/rpc_load.py [--ks 1,10,50,100] [--duration 60] [--jobs 10]
                                [--json OUT]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sdiag
from _common import serve
from tenantry.client.sync import Client
from tenantry.core.settings import load


def sdiag_reset() -> None:
    subprocess.run(["sdiag", "-r"], check=True, capture_output=True)


def sdiag_rpcs() -> dict[str, int]:
    out = subprocess.run(["sdiag"], check=True, capture_output=True, text=True).stdout
    section = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    return sdiag.counts(section.split("Remote Procedure Call statistics by user", 1)[0])


def summarize(counts: dict[str, int], duration: float) -> dict[str, Any]:
    total = sum(n for k, n in counts.items() if k != "REQUEST_STATS_INFO")
    queries = counts.get("REQUEST_JOB_INFO", 0) + counts.get("REQUEST_JOB_INFO_SINGLE", 0)
    return {
        "rpcs": total,
        "rpc_per_s": round(total / duration, 2),
        "job_queries": queries,
        "job_query_per_s": round(queries / duration, 2),
        "by_type": {k: v for k, v in sorted(counts.items()) if k != "REQUEST_STATS_INFO"},
    }


async def agent_loop(k: int, duration: float, check: Any) -> tuple[int, list[float]]:
    """One session: a check every second (phase-shifted by k), for ``duration`` s."""
    await asyncio.sleep((k % 100) / 100)
    lat: list[float] = []
    n = 0
    end = time.monotonic() + duration
    nxt = time.monotonic()
    while nxt < end:
        t = time.monotonic()
        await check(k)
        lat.append(time.monotonic() - t)
        n += 1
        nxt += 1.0
        await asyncio.sleep(max(0.0, nxt - time.monotonic()))
    return n, lat


async def measure(
    mode: str, k: int, duration: float, check: Any, stale: list[float] | None = None
) -> dict[str, Any]:
    """``k`` agents running ``check`` for ``duration`` seconds, the staleness of what they
    were told (``stale``; None: always fresh), and the scheduler RPCs it cost."""
    sdiag_reset()
    t0 = time.monotonic()
    results = await asyncio.gather(*(agent_loop(i, duration, check) for i in range(k)))
    wall = time.monotonic() - t0
    counts = sdiag_rpcs()
    lat = [x for _, ls in results for x in ls]
    return {
        "mode": mode,
        "k": k,
        "checks": sum(n for n, _ in results),
        "checks_per_s": round(sum(n for n, _ in results) / wall, 2),
        "p50_ms": round(statistics.median(lat) * 1000, 1) if lat else None,
        "max_staleness_s": 0.0 if stale is None else round(max(stale), 2) if stale else None,
        **summarize(counts, wall),
    }


async def run_direct(k: int, duration: float, backend_ids: list[str]) -> dict[str, Any]:
    squeue = shutil.which("squeue") or "squeue"

    async def check(i: int) -> None:
        proc = await asyncio.create_subprocess_exec(
            squeue,
            "-h",
            "-j",
            backend_ids[i % len(backend_ids)],
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await proc.wait()

    return await measure("direct", k, duration, check)


async def run_idle(duration: float) -> dict[str, Any]:
    """No agents: what the rest of the machine (and the daemon's poller) costs."""
    sdiag_reset()
    t0 = time.monotonic()
    await asyncio.sleep(duration)
    wall = time.monotonic() - t0
    return {"mode": "idle", "k": 0, "checks": 0, **summarize(sdiag_rpcs(), wall)}


async def run_tenantry(
    k: int, duration: float, settings: Any, job_ids: list[str]
) -> dict[str, Any]:
    clients = [
        Client(
            settings,
            autostart=False,
            claims={"agent": "claude-code", "session": f"bench-{i}", "host": "b", "project": ""},
        )
        for i in range(k)
    ]
    stale: list[float] = []

    async def check(i: int) -> None:
        res = await asyncio.to_thread(
            clients[i].call, "jobs.status", {"ids": [job_ids[i % len(job_ids)]]}
        )
        stale.append(float(res["jobs"][0]["staleness_s"]))

    return await measure("tenantry", k, duration, check, stale)


def start_daemon(state: str) -> tuple[subprocess.Popen[bytes], Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX"))}
    env.update(
        TENANTRY_STATE_DIR=state,
        TENANTRY_SOCKET=str(Path(state) / "sock"),
        TENANTRY_BACKEND="slurm",
        TENANTRY_POLL_FAST_S="0.5",
        TENANTRY_POLL_SLOW_S="1",  # status never staler than ~1-2 s
    )
    proc = serve(env, (Path(state) / "daemon.log").open("ab"))
    sock = str(Path(state) / "sock")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(sock)
            break
        except OSError:
            time.sleep(0.05)
        finally:
            s.close()
    else:
        proc.kill()
        raise SystemExit(f"daemon did not start; see {state}/daemon.log")
    return proc, load(env=env)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ks", default="1,10,50,100", help="comma-separated session counts")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds per run")
    ap.add_argument("--jobs", type=int, default=10, help="jobs the sessions check")
    ap.add_argument("--json", help="write results to this file")
    args = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root (sdiag -r resets the controller's statistics)")
    ks = [int(x) for x in args.ks.split(",") if x]
    state = tempfile.mkdtemp(prefix="tnt-bench-")
    os.chmod(state, 0o700)
    proc, settings = start_daemon(state)
    client = Client(settings, autostart=False, claims={"agent": "human", "session": ""})
    work = Path(state) / "work"
    work.mkdir()
    script = work / "sleep.sh"
    script.write_text("#!/bin/bash\nsleep 3600\n")
    jobs = []
    try:
        for i in range(args.jobs):
            res = client.call(
                "jobs.submit",
                {
                    "script": str(script),
                    "script_text": script.read_text(),
                    "cwd": str(work),
                    "name": f"bench-{i}",
                    "force": True,
                    "resources": {"time_s": 3600},
                },
            )
            jobs.append(res["job"])
        job_ids = [j["id"] for j in jobs]
        backend_ids = [j["backend_id"] for j in jobs]
        results = [await run_idle(args.duration)]
        print(f"idle baseline: controller RPC/s={results[0]['rpc_per_s']}", flush=True)
        for k in ks:
            for mode in ("direct", "tenantry"):
                if mode == "direct":
                    r = await run_direct(k, args.duration, backend_ids)
                else:
                    r = await run_tenantry(k, args.duration, settings, job_ids)
                results.append(r)
                print(
                    f"K={k:<4} {mode:<9} checks/s={r['checks_per_s']:<7} "
                    f"controller RPC/s={r['rpc_per_s']:<7} "
                    f"job-query RPC/s={r['job_query_per_s']:<7} "
                    f"p50={r['p50_ms']} ms  max staleness={r['max_staleness_s']} s",
                    flush=True,
                )
        results.append(await run_idle(args.duration))
        print(f"idle baseline: controller RPC/s={results[-1]['rpc_per_s']}", flush=True)
        ratio = {}
        for k in ks:
            d = next(r for r in results if r["k"] == k and r["mode"] == "direct")
            t = next(r for r in results if r["k"] == k and r["mode"] == "tenantry")
            ratio[k] = round(d["rpc_per_s"] / t["rpc_per_s"], 1) if t["rpc_per_s"] else None
        print("direct/tenantry controller RPC ratio by K:", ratio)
        if args.json:
            Path(args.json).write_text(
                json.dumps(
                    {
                        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "duration_s": args.duration,
                        "jobs": args.jobs,
                        "load_avg": os.getloadavg(),
                        "results": results,
                        "ratio": ratio,
                    },
                    indent=2,
                )
                + "\n"
            )
    finally:
        for j in jobs:
            try:
                client.call("jobs.cancel", {"id": j["id"]})
            except Exception as exc:  # best effort cleanup
                print(f"cancel {j['id']}: {exc}", file=sys.stderr)
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    asyncio.run(main())
