"""What a lease pilot costs per command, alone: a real pilot driven by a scripted daemon.

Starts ``python -m tenantry pilot`` against a small asyncio server in this
process that speaks the daemon's side of the pilot link (hello, welcome, auth,
the sealed link, one ``env``, then ``run`` messages: ``slots`` running and
``ahead`` more sent ahead, refilled as each ``exit`` arrives, each acked), and
reads the pilot's own CPU and its reaped commands' CPU from ``/proc`` while it
still runs. Nothing of the daemon (policy, audit, journal) is in the figure,
so the pilot's own share is read without the daemon's noise::

    PYTHONPATH=src python bench/pilot_cpu.py [--n 6000] [--slots 2] [--ahead 2] [--runs 3]
    PYTHONPATH=src python bench/pilot_cpu.py --profile pilot.prof   # cProfile of the pilot
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import time
from typing import Any

from tenantry.leases.pilot import protocol as p

TICK = os.sysconf("SC_CLK_TCK")


def _cpu(pid: int) -> tuple[float, float]:
    """(own, reaped children) CPU seconds of ``pid``."""
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rpartition(")")[2].split()
    return (int(f[11]) + int(f[12])) / TICK, (int(f[13]) + int(f[14])) / TICK


async def one_run(n: int, slots: int, ahead: int, profile: str = "") -> dict[str, float]:
    secret = "bench-" + secrets.token_hex(16)
    done: asyncio.Future[dict[str, float]] = asyncio.get_running_loop().create_future()
    pid: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        hello = await p.recv(reader)
        assert isinstance(hello, p.Hello)
        key, nonce = p.key_of(secret), secrets.token_hex(16)
        proof = p.proof(key, "daemon", hello.lease, hello.nonce, nonce)
        p.send(writer, p.Welcome(heartbeat_s=5.0, nonce=nonce, proof=proof))
        await writer.drain()
        auth = await p.recv(reader)
        assert isinstance(auth, p.Auth)
        assert p.check(key, "pilot", hello.lease, nonce, hello.nonce, auth.proof)
        p.seal(reader, writer, key, me="daemon", lease=hello.lease,
               pilot_nonce=hello.nonce, daemon_nonce=nonce)  # fmt: skip
        p.send(writer, p.Env(id="e1", env=dict(os.environ)))
        sent = got = 0

        def fill() -> None:
            nonlocal sent
            while sent - got < slots + ahead and sent < n:
                p.send(writer, p.Run(id=f"c{sent}", argv=("true",), cwd="/tmp",
                                     timeout_s=600.0, env_id="e1"))  # fmt: skip
                sent += 1

        own0, kids0 = _cpu(pid[0])
        t0 = time.perf_counter()
        fill()
        while got < n:
            msg = await p.recv(reader)
            if isinstance(msg, p.Exit):
                if msg.state != "completed":
                    raise RuntimeError(f"command {msg.id}: {msg.state} {msg.reason}")
                got += 1
                p.ack(writer, msg.id)
                fill()
        wall = time.perf_counter() - t0
        own, kids = _cpu(pid[0])
        p.send(writer, p.Release(reason="bench done"))
        p.flush(writer)
        done.set_result({
            "commands_per_s": n / wall,
            "pilot_cpu_ms": (own - own0) / n * 1000,
            "commands_cpu_ms": (kids - kids0) / n * 1000,
        })  # fmt: skip

    server = await asyncio.start_server(serve, "127.0.0.1", 0, limit=p.MAX_LINE + 1)
    port = server.sockets[0].getsockname()[1]
    prof = ["-m", "cProfile", "-o", profile] if profile else []
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *prof, "-m", "tenantry", "pilot", "--connect", f"127.0.0.1:{port}",
        "--lease", "l-bench", "--slots", str(slots), "--walltime", "3600",
        env={**os.environ, "TENANTRY_LEASE_SECRET": secret}, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    pid.append(proc.pid)
    try:
        result = await asyncio.wait_for(done, 600)
        await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
        server.close()
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=6000, help="`true` commands per run")
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--ahead", type=int, default=2, help="runs sent ahead of the free slots")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--profile", help="one run under cProfile, its stats written here")
    ap.add_argument("--json", help="also write the runs here")
    args = ap.parse_args()
    if args.n < 1 or args.slots < 1 or args.ahead < 0 or args.runs < 1:
        ap.error("--n, --slots and --runs must be positive, --ahead at least 0")
    runs: list[dict[str, Any]] = []
    for _ in range(1 if args.profile else args.runs):
        r = asyncio.run(one_run(args.n, args.slots, args.ahead, args.profile or ""))
        r["load_avg_1m"] = os.getloadavg()[0]
        runs.append(r)
        print(f"{r['commands_per_s']:.0f} commands/s; pilot {r['pilot_cpu_ms']:.3f} ms, "
              f"its commands {r['commands_cpu_ms']:.3f} ms of CPU per command "
              f"(load {r['load_avg_1m']:.2f})")  # fmt: skip
    if len(runs) > 1:
        print("median: pilot {:.3f} ms, commands {:.3f} ms per command, {:.0f}/s".format(
            statistics.median(r["pilot_cpu_ms"] for r in runs),
            statistics.median(r["commands_cpu_ms"] for r in runs),
            statistics.median(r["commands_per_s"] for r in runs),
        ))  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"n": args.n, "slots": args.slots, "ahead": args.ahead, "runs": runs}, fh)


if __name__ == "__main__":
    main()
