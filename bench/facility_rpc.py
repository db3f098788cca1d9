"""Controller RPCs with U users x K agents polling job status: direct vs `facility serve`.

On the real single-node Slurm (scripts/dev-slurm), for each size U x K:

  direct    U*K agent sessions, each runs `squeue -h -j <its user's job>` once
            per second *as its Unix user* (tt-i16c-bNN), as agents do today
  facility  a real `tenantry facility serve` (Slurm backend, its embedded store
            or --store-url) runs as the service account tt-i16c-svc and polls
            Slurm once a second for every user; one worker process per Unix
            user, *running as that user*, holds its K sessions, and each session
            asks the service's socket what an executor's status poller asks it
            (`facility.scheduler_status` for its user's job, through the
            executor's own channel `FacilityLink`), once per second; the service
            knows the caller from SO_PEERCRED

Controller RPCs are deltas of `sdiag` (never reset, so other users' benches
are undisturbed; a run whose "Data since" changed was reset by someone else
and is repeated). Counted per Unix user from sdiag's "by user" table, so other
engineers' jobs on the shared cluster do not blur the comparison: direct = the
bench users' RPCs, facility = the service account's. Staleness is the
`staleness_s` each facility answer carries (seconds since the poll it
reflects). The service's CPU time and RSS come from /proc.

Usage (root: creates users and a Slurm account, removed at the end except the users):
  python bench/facility_rpc.py                          # short: 1x1,10x10, 10 s, 1 run
  python bench/facility_rpc.py --sizes 1x1,1x10,10x1,5x10,10x10 --duration 20 --repeat 3 \
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
import shutil
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


# -- the facility side: `tenantry facility serve` as the service account ---------------------------
def start_service(
    tmp: str, svc: pwd.struct_passwd, store_url: str
) -> tuple[subprocess.Popen[bytes], str]:
    """The real service (Slurm backend: one `squeue --json` a second for every user)."""
    state, run = Path(tmp) / "svc", Path(tmp) / "run"
    for d, mode in ((state, 0o700), (run, 0o755)):
        d.mkdir(mode=mode)
        os.chown(d, svc.pw_uid, svc.pw_gid)
    sock = str(run / "facility.sock")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(state),
           "TENANTRY_BACKEND": "slurm", "TENANTRY_FACILITY_STAFF_GROUP": "",
           "TENANTRY_STORE_URL": store_url}  # fmt: skip
    log = (Path(tmp) / "service.log").open("ab")
    proc = subprocess.Popen(
        ["setpriv", f"--reuid={svc.pw_uid}", f"--regid={svc.pw_gid}", "--clear-groups", "--",
         sys.executable, "-m", "tenantry", "--state-dir", str(state), "facility", "serve",
         "--listen", sock], env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp,
    )  # fmt: skip
    return proc, sock


async def worker(sock: str, jobs: list[str], agents: int, duration: float) -> None:
    """One Unix user's K agent sessions (this process runs as the user: SO_PEERCRED).

    Each session asks the service what an executor's status poller asks it,
    ``facility.scheduler_status`` for its user's job, once a second, through the
    executor's own channel (``FacilityLink``). Waits for "go" on stdin; prints
    latencies and staleness as one JSON line.
    """
    from tenantry.core.models import AgentProduct, Principal
    from tenantry.facility.link import FacilityLink

    me = pwd.getpwuid(os.getuid())
    links = [FacilityLink(sock, 10.0) for _ in range(agents)]
    stale: list[float] = []
    errors: list[str] = []

    def checker(n: int) -> Any:
        p = Principal(me.pw_uid, me.pw_name, AgentProduct.CLAUDE_CODE, f"bench-{n}")
        job = jobs[n % len(jobs)]

        async def check() -> None:
            res, _ = await links[n].call(p, "facility.scheduler_status", {"ids": [job]})
            seen = res["jobs"].get(job)
            if res.get("source") != "poller" or seen is None:
                errors.append(f"{job}: {res}")
                return
            stale.append(float(seen["staleness_s"]))

        return check

    checks = [checker(n) for n in range(agents)]
    for c in checks:  # connected and answered once before the clock starts
        await c()
    stale.clear()
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    lats = await asyncio.gather(*(agent(n, duration, c) for n, c in enumerate(checks)))
    for link in links:
        await link.aclose()
    print(json.dumps({"lat": [x for ls in lats for x in ls], "stale": stale, "errors": errors[:5],
                      "n_errors": len(errors)}), flush=True)  # fmt: skip


def wait_service(sock: str, proc: subprocess.Popen[bytes], job: str, owner: pwd.struct_passwd,
                 tmp: str) -> None:  # fmt: skip
    """Until the service answers from its poller (as the job's owner, by SO_PEERCRED)."""
    deadline = time.monotonic() + 90
    probe = [*as_user(owner), sys.executable, __file__, "--probe", sock, "--jobs", job]
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("the facility service exited: "
                             + (Path(tmp) / "service.log").read_text()[-2000:])  # fmt: skip
        if subprocess.run(probe, capture_output=True, env=bench_env()).returncode == 0:
            return
        time.sleep(0.5)
    raise SystemExit("the facility service did not answer from its poller within 90 s")


async def probe(sock: str, job: str) -> None:
    from tenantry.core.models import Principal
    from tenantry.facility.link import FacilityLink

    me = pwd.getpwuid(os.getuid())
    link = FacilityLink(sock, 5.0)
    try:
        res, _ = await link.call(Principal(me.pw_uid, me.pw_name), "facility.scheduler_status",
                                 {"ids": [job]})  # fmt: skip
    finally:
        await link.aclose()
    raise SystemExit(0 if res.get("source") == "poller" and job in res["jobs"] else 1)


def as_user(p: pwd.struct_passwd) -> list[str]:
    return ["setpriv", f"--reuid={p.pw_uid}", f"--regid={p.pw_gid}", "--init-groups", "--"]


def bench_env() -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}


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

    async def run() -> list[list[float]]:
        return list(await asyncio.gather(*(agent(n, duration, c) for n, c in enumerate(checks))))

    return await measured("direct", u, k, duration, run, {p.pw_name for p in pws[:u]})


def worker_proc(p: pwd.struct_passwd, job: str, k: int, duration: float,
                sock: str) -> subprocess.Popen[bytes]:  # fmt: skip
    argv = [*as_user(p), sys.executable, __file__, "--worker", sock, "--jobs", job,
            "--agents", str(k), "--duration", str(duration)]  # fmt: skip
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=bench_env())


async def run_facility(u: int, k: int, duration: float, pws: list[pwd.struct_passwd],
                       jobs: list[str], sock: str, svc_pid: int) -> dict[str, Any]:  # fmt: skip
    """U worker processes, one per Unix user, each with K sessions on the service's socket."""
    procs = [worker_proc(pws[i], jobs[i], k, duration, sock) for i in range(u)]
    loop = asyncio.get_running_loop()
    for p in procs:
        assert p.stdout is not None
        line = await loop.run_in_executor(None, p.stdout.readline)
        if line.strip() != b"ready":
            raise SystemExit(f"a bench worker did not start: {line!r}")
    results: list[dict[str, Any]] = []

    async def go() -> list[list[float]]:
        for p in procs:
            assert p.stdin is not None
            p.stdin.write(b"go\n")
            p.stdin.flush()
        for p in procs:
            assert p.stdout is not None
            results.append(json.loads(await loop.run_in_executor(None, p.stdout.readline)))
        return [r["lat"] for r in results]

    cpu0 = proc_cpu_s(svc_pid)
    out = await measured("facility", u, k, duration, go, {SVC})
    for p in procs:
        p.wait()
    out["service_cpu_pct"] = round(100 * (proc_cpu_s(svc_pid) - cpu0) / out["wall_s"], 1)
    out["service_rss_mb"] = round(proc_rss_mb(svc_pid), 1)
    out["errors"] = sum(r["n_errors"] for r in results)
    if out["errors"]:
        print(f"  facility {u}x{k}: {out['errors']} answers without the job: "
              f"{[e for r in results for e in r['errors']][:3]}")  # fmt: skip
    stale = sorted(x for r in results for x in r["stale"])
    out["staleness_p50_s"] = round(stale[len(stale) // 2], 3) if stale else None
    out["staleness_p99_s"] = (
        round(stale[min(len(stale) - 1, int(len(stale) * 0.99))], 3) if stale else None
    )
    out["staleness_max_s"] = round(stale[-1], 3) if stale else None
    return out


async def measured(mode: str, u: int, k: int, duration: float, run: Any,
                   attributed_users: set[str]) -> dict[str, Any]:  # fmt: skip
    """``run()`` drives the sessions and returns their check latencies; sdiag around it."""
    since0, types0, users0 = sdiag()
    t0 = time.monotonic()
    lats = await run()
    wall = time.monotonic() - t0
    since1, types1, users1 = sdiag()
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
        "by_type": by_type, "by_user": by_user, "sdiag_reset": since0 != since1,
    }  # fmt: skip


def median_of(rows: list[dict[str, Any]], key: str) -> Any:
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1x1,10x10", help="comma-separated UxK (U<=10, K<=10)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    ap.add_argument("--repeat", type=int, default=1, help="runs per size and mode (medians)")
    ap.add_argument("--store-url", default="",
                    help="the service's store_url (default: its embedded SQLite; or a "
                         "postgresql:// URL)")  # fmt: skip
    ap.add_argument("--json", help="write results to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # one user's sessions (as that user)
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    ap.add_argument("--jobs", default="", help=argparse.SUPPRESS)
    ap.add_argument("--agents", type=int, default=1, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        await worker(args.worker, args.jobs.split(","), args.agents, args.duration)
        return
    if args.probe:
        await probe(args.probe, args.jobs)
        return
    if os.geteuid() != 0:
        raise SystemExit("needs root (creates Unix users and a Slurm account; runs squeue as them)")
    me = asyncio.current_task()
    assert me is not None
    for sig in (signal.SIGINT, signal.SIGTERM):  # clean up (jobs, accounts) when stopped
        asyncio.get_running_loop().add_signal_handler(sig, me.cancel)
    load0 = os.getloadavg()
    sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",") if s]
    max_u = max(u for u, _ in sizes)
    svc = ensure_user(SVC)
    pws, jobs = setup(max_u)
    tmp = tempfile.mkdtemp(prefix="tt-fac-bench-")
    os.chmod(tmp, 0o755)  # the users' sessions reach the socket below it
    svc_proc, sock = start_service(tmp, svc, args.store_url)
    rows: list[dict[str, Any]] = []
    try:
        wait_service(sock, svc_proc, jobs[0], pws[0], tmp)
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
                    for _attempt in range(3):  # again when someone reset sdiag meanwhile
                        if mode == "direct":
                            r = await run_direct(u, k, args.duration, pws, jobs)
                        else:
                            r = await run_facility(u, k, args.duration, pws, jobs, sock,
                                                   svc_proc.pid)  # fmt: skip
                        if not r["sdiag_reset"]:
                            break
                        print(f"  ({mode} {u}x{k}: sdiag was reset during the run; again)")
                    r["repeat"] = rep
                    rows.append(r)
                    print(f"{mode:8s} U={u:2d} K={k:2d}  checks/s={r['checks_per_s']:6.1f}  "
                          f"RPC/s attributed={r['rpc_per_s_attributed']:7.2f}  "
                          f"all users={r['rpc_per_s_all_users']:7.2f}"
                          + (f"  staleness p99={r['staleness_p99_s']} s  "
                             f"cpu={r['service_cpu_pct']}%  rss={r['service_rss_mb']} MB"
                             if mode == "facility" else ""), flush=True)  # fmt: skip
    finally:
        svc_proc.terminate()
        try:
            svc_proc.wait(30)
        except subprocess.TimeoutExpired:
            svc_proc.kill()
            svc_proc.wait()
        teardown(pws, jobs)
        shutil.rmtree(tmp, ignore_errors=True)
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
            "errors": sum(r["errors"] for r in f),
        })  # fmt: skip
        row = summary[-1]
        if row["service_cpu_pct"] is not None:  # what 100 sessions add over the idle service
            per = 100 / (u * k)
            row["cpu_pct_per_100_sessions"] = round(
                (row["service_cpu_pct"] - idle["service_cpu_pct"]) * per, 1
            )
            row["rss_mb_per_100_sessions"] = round(
                (row["service_rss_mb"] - idle["service_rss_mb"]) * per, 1)  # fmt: skip
    print(json.dumps({"idle": idle, "summary": summary}, indent=1))
    if args.json:
        load = {"start": load0, "end": os.getloadavg()}
        Path(args.json).write_text(json.dumps({
            "args": vars(args), "loadavg": load, "idle": idle, "summary": summary, "runs": rows,
        }, indent=1))  # fmt: skip


if __name__ == "__main__":
    asyncio.run(main())
