"""Controller RPCs with U users x K agents polling job status: direct vs the facility poller.

On the real single-node Slurm (scripts/dev-slurm), for each size U x K:

  direct    U*K agent sessions, each runs `squeue -h -j <its user's job>` once
            per second *as its Unix user* (tt-i16c-bNN), as agents do today
  facility  the same sessions each ask the facility status cache once per
            second over a Unix socket; one poller process polls Slurm for all
            of them (`squeue --json` once per second, as the service account
            tt-i16c-svc) -- tenantry.facility.poller behind a minimal JSON-lines
            server (the bench's own, not `tenantry facility serve`)

Controller RPCs are deltas of `sdiag` (never reset, so other users' benches
are undisturbed; a run whose "Data since" changed was reset by someone else
and is repeated). Counted per Unix user from sdiag's "by user" table, so other
engineers' jobs on the shared cluster do not blur the comparison: direct = the
bench users' RPCs, facility = the service account's. Staleness is the
`staleness_s` each facility answer carries (seconds since the poll it
reflects). The poller process's CPU time and RSS come from /proc.

Usage (root: creates users and a Slurm account, removed at the end except the users):
  python bench/facility_rpc.py                          # short: 1x1,10x10, 10 s, 1 run
  python bench/facility_rpc.py --sizes 1x1,1x10,10x1,5x10,10x10 --duration 30 --repeat 3 \
      --json bench/results/facility_rpc.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ACCOUNT = "tt_i16c_bench"
SVC = "tt-i16c-svc"
RPC_LINE = re.compile(r"^\s+(\S+)\s+\(\s*(\d+)\)\s+count:(\d+)")
SINCE = re.compile(r"^Data since\s+.*\((\d+)\)", re.M)


# -- sdiag ------------------------------------------------------------------------------
def sdiag() -> tuple[str, dict[str, int], dict[str, int]]:
    """(data-since stamp, RPCs by message type, RPCs by user) as sdiag prints them now."""
    out = subprocess.run(["sdiag"], check=True, capture_output=True, text=True).stdout
    m = SINCE.search(out)
    since = m.group(1) if m else ""
    by_type_txt = out.split("Remote Procedure Call statistics by message type", 1)[-1]
    by_type_txt, _, by_user_txt = by_type_txt.partition("Remote Procedure Call statistics by user")
    by_user_txt = by_user_txt.split("Pending RPC statistics", 1)[0]

    def table(text: str) -> dict[str, int]:
        rows = (RPC_LINE.match(line) for line in text.splitlines())
        return {r.group(1): int(r.group(3)) for r in rows if r}

    return since, table(by_type_txt), table(by_user_txt)


def delta(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: b[k] - a.get(k, 0) for k in b if b[k] - a.get(k, 0) > 0}


# -- users, jobs ---------------------------------------------------------------------------
def ensure_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-M", "-s", "/bin/sh", name], capture_output=True)
        return pwd.getpwnam(name)


def sacctmgr(*args: str) -> None:
    subprocess.run(["sacctmgr", "-i", *args], capture_output=True, text=True, timeout=60)


def setup(users: int) -> tuple[list[pwd.struct_passwd], list[str]]:
    names = [f"tt-i16c-b{i:02d}" for i in range(users)]
    pws = [ensure_user(n) for n in names]
    sacctmgr("add", "account", ACCOUNT, "description=bench", "organization=tt")
    for n in names:
        sacctmgr("add", "user", n, f"account={ACCOUNT}")
    jobs = []
    for n in names:
        out = subprocess.run(
            ["runuser", "-u", n, "--", "sbatch", "--parsable", f"--account={ACCOUNT}",
             "--chdir=/tmp", "--output=/dev/null", "--time=30", "--mem=16M",
             "--job-name=tt-bench", "--wrap=sleep 1800"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        jobs.append(out.stdout.strip().split(";")[0])
    return pws, jobs


def teardown(pws: list[pwd.struct_passwd], jobs: list[str]) -> None:
    if jobs:
        subprocess.run(["scancel", *jobs], capture_output=True)
    for p in pws:
        sacctmgr("delete", "user", f"name={p.pw_name}", f"account={ACCOUNT}")
    sacctmgr("delete", "account", ACCOUNT)


# -- the facility side: poller + cache behind a minimal server ---------------------------------
async def serve(sock: str, interval: float, run_as: str) -> None:
    from tenantry.core import errors
    from tenantry.facility.poller import (
        LocalPublisher,
        Poller,
        SlurmSnapshotSource,
        StatusCache,
        Viewer,
    )

    wrappers = {}
    if run_as:  # squeue/sacct as the service account, so sdiag attributes them to it
        d = Path(sock).parent
        for cmd in ("squeue", "sacct"):
            w = d / f"{cmd}-as-svc"
            w.write_text(f'#!/bin/sh\nexec setpriv --reuid={run_as} --regid={run_as} '
                         f'--clear-groups {cmd} "$@"\n')  # fmt: skip
            w.chmod(0o755)
            wrappers[cmd] = str(w)
    cache = StatusCache()
    poller = Poller(SlurmSnapshotSource(binaries=wrappers), cache, LocalPublisher(cache),
                    interval_s=interval)  # fmt: skip
    task = asyncio.create_task(poller.run())

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                req = json.loads(line)
                # bench harness: the viewer comes from the request (the real service
                # takes it from SO_PEERCRED or MUNGE)
                viewer = Viewer(int(req["uid"]), str(req["user"]))
                try:
                    v = cache.status_of(str(req["job"]), viewer)
                    ans = {"ok": True, "state": v.status.state.value, "staleness_s": v.staleness_s}
                except errors.TenantryError as exc:
                    ans = {"ok": False, "error": exc.message}
                writer.write(json.dumps(ans).encode() + b"\n")
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_unix_server(handle, sock, limit=1 << 16)
    while not cache.health.polls:
        await asyncio.sleep(0.05)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()
    task.cancel()


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- the agents -----------------------------------------------------------------------------------
async def agent(i: int, duration: float, check: Any) -> list[float]:
    await asyncio.sleep(random.Random(i).random())  # independent agents: any phase
    lat: list[float] = []
    end = time.monotonic() + duration
    nxt = time.monotonic()
    while nxt < end:
        t = time.monotonic()
        await check()
        lat.append(time.monotonic() - t)
        nxt += 1.0
        await asyncio.sleep(max(0.0, nxt - time.monotonic()))
    return lat


async def run_direct(u: int, k: int, duration: float, pws: list[pwd.struct_passwd],
                     jobs: list[str]) -> dict[str, Any]:  # fmt: skip
    def checker(n: int) -> Any:
        p, job = pws[n % u], jobs[n % u]

        async def check() -> None:
            proc = await asyncio.create_subprocess_exec(
                "squeue", "-h", "-j", job, stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL, user=p.pw_uid, group=p.pw_gid,
                extra_groups=[],
            )  # fmt: skip
            await proc.wait()

        return check

    checks = [checker(n) for n in range(u * k)]
    return await measured("direct", u, k, duration, checks, {p.pw_name for p in pws[:u]})


async def run_facility(u: int, k: int, duration: float, pws: list[pwd.struct_passwd],
                       jobs: list[str], sock: str, svc_pid: int) -> dict[str, Any]:  # fmt: skip
    stale: list[float] = []
    conns = [await asyncio.open_unix_connection(sock) for _ in range(u * k)]

    def checker(n: int) -> Any:
        p, job = pws[n % u], jobs[n % u]
        reader, writer = conns[n]
        req = json.dumps({"uid": p.pw_uid, "user": p.pw_name, "job": job}).encode() + b"\n"

        async def check() -> None:
            writer.write(req)
            await writer.drain()
            ans = json.loads(await reader.readline())
            if not ans.get("ok"):
                raise SystemExit(f"facility answered an error: {ans}")
            stale.append(float(ans["staleness_s"]))

        return check

    cpu0 = proc_cpu_s(svc_pid)
    out = await measured("facility", u, k, duration, [checker(n) for n in range(u * k)], {SVC})
    out["service_cpu_pct"] = round(100 * (proc_cpu_s(svc_pid) - cpu0) / out["wall_s"], 1)
    out["service_rss_mb"] = round(proc_rss_mb(svc_pid), 1)
    stale.sort()
    out["staleness_p50_s"] = round(stale[len(stale) // 2], 3) if stale else None
    out["staleness_p99_s"] = (
        round(stale[min(len(stale) - 1, int(len(stale) * 0.99))], 3) if stale else None
    )
    out["staleness_max_s"] = round(stale[-1], 3) if stale else None
    for _, w in conns:
        w.close()
    return out


async def measured(mode: str, u: int, k: int, duration: float, checks: list[Any],
                   attributed_users: set[str]) -> dict[str, Any]:  # fmt: skip
    for _attempt in range(3):
        since0, types0, users0 = sdiag()
        t0 = time.monotonic()
        lats = await asyncio.gather(*(agent(n, duration, c) for n, c in enumerate(checks)))
        wall = time.monotonic() - t0
        since1, types1, users1 = sdiag()
        if since0 == since1:
            break
        print(f"  ({mode} {u}x{k}: sdiag was reset by someone else during the run; again)")
    by_type = delta(types0, types1)
    by_type.pop("REQUEST_STATS_INFO", None)  # sdiag's own
    by_user = delta(users0, users1)
    mine = sum(n for user, n in by_user.items() if user in attributed_users)
    flat = sorted(x for ls in lats for x in ls)
    return {
        "mode": mode, "users": u, "agents_per_user": k, "sessions": u * k,
        "wall_s": round(wall, 2),
        "checks": len(flat), "checks_per_s": round(len(flat) / wall, 2),
        "check_p50_ms": round(flat[len(flat) // 2] * 1000, 1) if flat else None,
        "rpcs_attributed": mine, "rpc_per_s_attributed": round(mine / wall, 2),
        "rpcs_all_users": sum(by_type.values()),
        "rpc_per_s_all_users": round(sum(by_type.values()) / wall, 2),
        "by_type": by_type, "by_user": by_user,
    }  # fmt: skip


def median_of(rows: list[dict[str, Any]], key: str) -> Any:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1x1,10x10", help="comma-separated UxK (U<=10, K<=10)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    ap.add_argument("--repeat", type=int, default=1, help="runs per size and mode (medians)")
    ap.add_argument("--interval", type=float, default=1.0, help="the poller's interval (s)")
    ap.add_argument("--json", help="write results to this file")
    ap.add_argument("--serve", help=argparse.SUPPRESS)
    ap.add_argument("--run-as", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        await serve(args.serve, args.interval, args.run_as)
        return
    if os.geteuid() != 0:
        raise SystemExit("needs root (creates Unix users and a Slurm account; runs squeue as them)")
    me = asyncio.current_task()
    assert me is not None
    for sig in (signal.SIGINT, signal.SIGTERM):  # clean up (jobs, accounts) when stopped
        asyncio.get_running_loop().add_signal_handler(sig, me.cancel)
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",") if s]
    max_u = max(u for u, _ in sizes)
    svc = ensure_user(SVC)
    pws, jobs = setup(max_u)
    tmp = tempfile.mkdtemp(prefix="tt-i16c-bench-")
    sock = os.path.join(tmp, "facility.sock")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    svc_proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", sock, "--interval", str(args.interval),
         "--run-as", str(svc.pw_uid)], stdout=subprocess.PIPE, env=env,
    )  # fmt: skip
    rows: list[dict[str, Any]] = []
    try:
        assert svc_proc.stdout is not None
        if svc_proc.stdout.readline().strip() != b"ready":
            raise SystemExit("the facility poller did not start")
        # wait until every job is RUNNING, so both modes look at the same states
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            out = subprocess.run(["squeue", "-h", "-o", "%T", "-j", ",".join(jobs)],
                                 capture_output=True, text=True).stdout.split()  # fmt: skip
            if len(out) == len(jobs) and set(out) == {"RUNNING"}:
                break
            time.sleep(0.5)
        idle_cpu0, t0 = proc_cpu_s(svc_proc.pid), time.monotonic()
        await asyncio.sleep(min(10.0, args.duration))
        idle = {"service_cpu_pct": round(100 * (proc_cpu_s(svc_proc.pid) - idle_cpu0)
                                         / (time.monotonic() - t0), 1),
                "service_rss_mb": round(proc_rss_mb(svc_proc.pid), 1)}  # fmt: skip
        print(f"poller idle (0 sessions): {idle}")
        for rep in range(args.repeat):
            for u, k in sizes:
                for mode in ("direct", "facility"):
                    if mode == "direct":
                        r = await run_direct(u, k, args.duration, pws, jobs)
                    else:
                        r = await run_facility(u, k, args.duration, pws, jobs, sock, svc_proc.pid)
                    r["repeat"] = rep
                    rows.append(r)
                    print(f"{mode:8s} U={u:2d} K={k:2d}  checks/s={r['checks_per_s']:6.1f}  "
                          f"RPC/s attributed={r['rpc_per_s_attributed']:7.2f}  "
                          f"all users={r['rpc_per_s_all_users']:7.2f}"
                          + (f"  staleness p99={r['staleness_p99_s']} s  "
                             f"cpu={r['service_cpu_pct']}%  rss={r['service_rss_mb']} MB"
                             if mode == "facility" else ""), flush=True)  # fmt: skip
    finally:
        svc_proc.kill()
        svc_proc.wait()
        teardown(pws, jobs)
        for f in Path(tmp).iterdir():
            f.unlink()
        os.rmdir(tmp)
    summary = []
    for u, k in sizes:
        d = [r for r in rows if (r["users"], r["agents_per_user"], r["mode"]) == (u, k, "direct")]
        f = [r for r in rows if (r["users"], r["agents_per_user"], r["mode"]) == (u, k, "facility")]
        dr, fr = median_of(d, "rpc_per_s_attributed"), median_of(f, "rpc_per_s_attributed")
        summary.append({
            "users": u, "agents_per_user": k, "sessions": u * k,
            "direct_checks_per_s": median_of(d, "checks_per_s"),
            "direct_rpc_per_s": dr, "facility_checks_per_s": median_of(f, "checks_per_s"),
            "facility_rpc_per_s": fr,
            "ratio": round(dr / fr, 1) if dr and fr else None,
            "staleness_p99_s": median_of(f, "staleness_p99_s"),
            "staleness_max_s": max((r["staleness_max_s"] or 0) for r in f) if f else None,
            "service_cpu_pct": median_of(f, "service_cpu_pct"),
            "service_rss_mb": median_of(f, "service_rss_mb"),
        })  # fmt: skip
    print(json.dumps({"idle": idle, "summary": summary}, indent=1))
    if args.json:
        load = os.getloadavg()
        Path(args.json).write_text(json.dumps({
            "args": vars(args), "loadavg": load, "idle": idle, "summary": summary, "runs": rows,
        }, indent=1))  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
