"""Where a daemon's CPU per command goes: its threads, its children, optionally a profile.

Starts a real ``tenantry serve`` as ``bench/commands.py``'s daemon arms do,
runs ``true`` commands through it (``--mode burst``: rounds of 250 at once;
``--mode single``: one after another) and prints the CPU per command of each
of the daemon's threads (from ``/proc``), of its reaped children (the
commands, the pilot) and of this client. With ``--py-spy OUT`` it records
the daemon meanwhile (``py-spy record --gil --threads --format raw``)::

    PYTHONPATH=src python bench/daemon_threads.py --where local --mode burst --n 3000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import commands as arms  # bench/commands.py: the daemon arm and the CPU readers

TICK = os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each thread of ``pid`` (by tid; the main thread's tid is the pid)."""
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as fh:
            f = fh.read().rpartition(")")[2].split()
        out["main" if int(tid) == pid else f"thread {tid}"] = (int(f[11]) + int(f[12])) / TICK
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rpartition(")")[2].split()
    out["reaped children"] = (int(f[13]) + int(f[14])) / TICK
    kids = arms._children_map()
    todo = [child for child, _ in kids.get(pid, [])]
    while todo:  # the spawner, a lease's job script and its pilot, ...
        child = todo.pop()
        todo.extend(grandchild for grandchild, _ in kids.get(child, []))
        try:
            with open(f"/proc/{child}/cmdline", "rb") as fh:
                name = fh.read().rstrip(b"\0").rpartition(b"\0")[2].decode()[-24:]
            with open(f"/proc/{child}/stat") as fh:
                f = fh.read().rpartition(")")[2].split()
        except OSError:
            continue
        out[f"child {name}"] = (int(f[11]) + int(f[12])) / TICK
        out[f"child {name}, reaped"] = (int(f[13]) + int(f[14])) / TICK  # the commands it reaped
    return out


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="tnt-bench-") as tmp:
        arm = arms.DaemonArm(args.where, Path(tmp) / "d")
        await arm.open()
        for _ in range(200):  # warm: sessions, caches, the lease
            await arm.run(["true"])
        spy = None
        if args.py_spy:
            record = ["record", "--pid", str(arm.proc.pid), "--gil", "--threads", "-r", "500"]
            spy = subprocess.Popen(
                ["py-spy", *record, "--format", "raw", "-o", args.py_spy],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            await asyncio.sleep(1.0)  # py-spy attached
        before, own0, t0 = thread_cpu(arm.proc.pid), arms.own_cpu(), time.perf_counter()
        lat: list[float] = []
        if args.mode == "burst":
            for _ in range(max(1, args.n // 250)):
                await asyncio.gather(*(arm.run(["true"]) for _ in range(250)))
            n = max(1, args.n // 250) * 250
        else:
            for _ in range(args.n):
                t = time.perf_counter()
                await arm.run(["true"])
                lat.append(time.perf_counter() - t)
            n = args.n
        wall = time.perf_counter() - t0
        after, own1 = thread_cpu(arm.proc.pid), arms.own_cpu()
        if spy is not None:
            spy.send_signal(2)
            spy.wait()
        await arm.close()
    print(
        f"daemon-{args.where} {args.mode}: {n / wall:.0f} commands/s, load {os.getloadavg()[0]:.1f}"
    )
    if lat:
        print(f"  single p50 {arms.pct(lat, 0.5) * 1e3:.2f} ms")
    for name, cpu in after.items():
        used = cpu - before.get(name, 0.0)
        if used > 0:
            print(f"  {name:16s} {used / n * 1e3:.3f} ms CPU per command")
    print(f"  {'this client':16s} {(own1 - own0) / n * 1e3:.3f} ms CPU per command")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--where", choices=("local", "lease"), default="local")
    ap.add_argument("--mode", choices=("burst", "single"), default="burst")
    ap.add_argument("--n", type=int, default=2000, help="commands (default 2000)")
    ap.add_argument("--py-spy", help="record the daemon with py-spy into this file")
    asyncio.run(main_async(ap.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
