"""What one status poll of a user-mode daemon costs as the cluster's queue grows.

A user-mode daemon polls Slurm for the few jobs it tracks. Slurm 22.05's
``squeue --json`` ignores ``--me`` and ``--jobs`` and prints every user's jobs
(finished ones too, for ``MinJobAge``), so each poll read and parsed the whole
queue; ``SlurmBackend.query`` now asks for the named jobs in squeue's columns
(``backends/squeue_fields``). Both ways, side by side in one run, for one job
of this user among the queue as it is and among ``--others`` more held jobs of
another user (submitted here, cancelled at the end):

- **json**: ``squeue --json --me`` and ``parse_squeue_json`` of all of it (the
  poll before; the facility service's poller still reads all users this way);
- **columns**: ``SlurmBackend.query`` (``squeue --me --jobs=ID --Format=...``);
- **columns-all**: the facility service's snapshot of every user's jobs in the
  same columns (``squeue --all --states=all --Format=...``, parsed), which
  replaced ``squeue --json`` there (for all users 22.05 prints the same JSON
  as the **json** row's).

Per poll, medians of ``--n``: wall time, the CPU of this process (parsing) and
of the ``squeue`` child, and the bytes squeue printed. Needs the dev cluster
(``scripts/dev-slurm start --accounting``) and root (for the other user).

    PYTHONPATH=src python bench/status_query.py --n 30 --others 0,2000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pwd
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tenantry.backends import slurm_parse as sp
from tenantry.backends.slurm import SlurmBackend
from tenantry.core.settings import load
from tenantry.facility.poller import SlurmSnapshotSource

OTHER = "tt-queue-other"


def _child_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _other_user() -> None:
    """A Unix user with an association in Slurm's accounting (account ``root``)."""
    try:
        pwd.getpwnam(OTHER)
    except KeyError:
        subprocess.run(["useradd", "-m", OTHER], check=True)
    known = subprocess.run(["sacctmgr", "-nP", "show", "user", OTHER, "format=user"],
                           capture_output=True, text=True, check=True).stdout  # fmt: skip
    if not known.strip():
        subprocess.run(["sacctmgr", "-i", "add", "user", OTHER, "account=root"],
                       capture_output=True, check=True)  # fmt: skip


def _fill(n: int) -> list[str]:
    """``n`` held one-line jobs of the other user, one ``sbatch`` each (a held array
    would be one queue record until it runs)."""
    loop = (
        f"cd /tmp && for i in $(seq {n}); do sbatch --parsable --hold -o /dev/null"
        " --wrap true -J tt-queue-fill || exit 1; done"
    )
    out = subprocess.run(["su", OTHER, "-c", loop], capture_output=True, text=True, check=True)
    return [line.split(";")[0] for line in out.stdout.split()]


def _json_poll(job: str) -> tuple[float, float, float, int]:
    t0, c0, k0 = time.perf_counter(), time.process_time(), _child_cpu()
    out = subprocess.run(["squeue", "--json", "--me"], capture_output=True, text=True).stdout
    got = [j for j in sp.parse_squeue_json(out) if j.parent_id == job]
    assert got, f"job {job} not in squeue --json"
    return time.perf_counter() - t0, time.process_time() - c0, _child_cpu() - k0, len(out)


async def _columns_poll(backend: SlurmBackend, job: str) -> tuple[float, float, float, int]:
    t0, c0, k0 = time.perf_counter(), time.process_time(), _child_cpu()
    got = await backend.query([job])
    assert job in got and got[job].extra.get("source") == "squeue", got
    wall, cpu, kid = time.perf_counter() - t0, time.process_time() - c0, _child_cpu() - k0
    from tenantry.backends import squeue_fields

    size = len(subprocess.run(squeue_fields.argv([job]), capture_output=True).stdout)
    return wall, cpu, kid, size


async def _all_poll(source: SlurmSnapshotSource) -> tuple[float, float, float, int]:
    t0, c0, k0 = time.perf_counter(), time.process_time(), _child_cpu()
    jobs = await source.snapshot()
    assert jobs
    wall, cpu, kid = time.perf_counter() - t0, time.process_time() - c0, _child_cpu() - k0
    from tenantry.backends import squeue_fields

    size = len(subprocess.run(squeue_fields.argv_all(), capture_output=True).stdout)
    return wall, cpu, kid, size


def _median(rows: list[tuple[float, float, float, int]], i: int) -> float:
    return statistics.median(r[i] for r in rows)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=30, help="polls per way and queue size")
    ap.add_argument("--others", default="0,2000", help="held jobs of another user to add")
    ap.add_argument("--json", dest="json_out", help="write the results here")
    args = ap.parse_args()
    _other_user()
    state = tempfile.mkdtemp(prefix="tnt-bench-")
    backend = SlurmBackend(load(env={**os.environ, "TENANTRY_STATE_DIR": state}))
    await backend.start()
    source = SlurmSnapshotSource(timeout_s=60)
    script = Path(state) / "job.sh"
    script.write_text("#!/bin/sh\nsleep 600\n")
    mine = subprocess.run(["sbatch", "--parsable", "-o", "/dev/null", "-J", "tt-queue-mine",
                           str(script)], capture_output=True, text=True, check=True)  # fmt: skip
    job = mine.stdout.strip().split(";")[0]
    results: list[dict[str, object]] = []
    filled: list[str] = []
    added = 0
    try:
        for others in [int(x) for x in args.others.split(",")]:
            if others > added:
                filled += _fill(others - added)
                added = others
            queue = len(json.loads(subprocess.run(["squeue", "--json"], capture_output=True,
                                                  text=True).stdout)["jobs"])  # fmt: skip
            rows: dict[str, list[tuple[float, float, float, int]]] = {
                "json": [],
                "columns": [],
                "columns-all": [],
            }
            for _ in range(args.n):  # alternating, one of each in turn
                rows["json"].append(_json_poll(job))
                rows["columns"].append(await _columns_poll(backend, job))
                rows["columns-all"].append(await _all_poll(source))
            for way, r in rows.items():
                res = {
                    "queue_records": queue,
                    "way": way,
                    "wall_ms": round(1e3 * _median(r, 0), 2),
                    "parse_cpu_ms": round(1e3 * _median(r, 1), 2),
                    "squeue_cpu_ms": round(1e3 * _median(r, 2), 2),
                    "bytes": int(_median(r, 3)),
                    "load": round(os.getloadavg()[0], 2),
                }
                results.append(res)
                print(
                    f"queue {queue:6d} records  {way:11s} wall {res['wall_ms']:8.2f} ms"
                    f"  parse CPU {res['parse_cpu_ms']:7.2f} ms  squeue CPU"
                    f" {res['squeue_cpu_ms']:7.2f} ms  {res['bytes']:9d} bytes"
                    f"  load {res['load']}",
                    flush=True,
                )
    finally:
        subprocess.run(["scancel", job], check=False)
        if filled:
            subprocess.run(["scancel", *filled], check=False)
        await backend.aclose()
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
