"""Failover: SIGKILL the leader replica while jobs run and waiters wait.

Two replica processes (real subprocesses) on one PostgreSQL and the real
Slurm. The follower must take the poller within 5 s; every waiter, resuming on
the surviving replica from the last seq it saw, must observe every change the
shared log recorded for its job, in order; the log must hold every job's
whole life up to its terminal state.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from tests.facility.cluster.helpers import User, sbatch_as, wait_until

HERE = Path(__file__).parent
ROOT = HERE.parents[2]
JOBS = int(os.environ.get("TENANTRY_FAILOVER_JOBS", "4"))


class Replica:
    def __init__(self, dsn: str, sock: Path, name: str) -> None:
        self.sock = sock
        self.name = name
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "replica_proc.py"), dsn, str(sock), name],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT,
        )  # fmt: skip
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == b"ready", f"replica {name} did not start"

    async def call(self, req: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
        reader, writer = await asyncio.open_unix_connection(str(self.sock))
        try:
            writer.write(json.dumps(req).encode() + b"\n")
            await writer.drain()
            line = await asyncio.wait_for(reader.readline(), timeout)
        finally:
            writer.close()
        if not line:
            raise ConnectionError(f"replica {self.name} closed the connection")
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def health(self) -> dict[str, Any]:
        return (await self.call({"op": "health"}))["result"]  # type: ignore[no-any-return]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def replicas(pg_dsn: str, tmp_path: Path) -> Iterator[list[Replica]]:
    made: list[Replica] = []
    try:
        for name in ("r1", "r2"):
            made.append(Replica(pg_dsn, tmp_path / f"{name}.sock", name))
            if name == "r1":  # r1 leads first: the test kills a known leader
                wait_until(lambda: asyncio.run(made[0].health())["leader"], 20, "r1 to lead")
        yield made
    finally:
        for r in made:
            r.stop()


async def waiter(job: str, replicas: list[Replica], seen: list[tuple[int, str]]) -> None:
    """Follow ``job`` to its end, moving to the next replica when one dies."""
    since, which = 0, 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rep = replicas[which]
        try:
            answer = await rep.call({"op": "wait", "job": job, "since": since, "timeout": 5})
        except (ConnectionError, OSError):
            which = (which + 1) % len(replicas)
            await asyncio.sleep(0.05)
            continue
        if not answer["ok"]:  # not yet polled / not yet known to this replica
            await asyncio.sleep(0.1)
            continue
        view = answer["result"]
        if view["changed"]:
            seen.append((view["seq"], view["state"]))
            since = view["seq"]
            if view["state"] not in ("PENDING", "RUNNING", "SUSPENDED", "REQUEUED"):
                return
    raise AssertionError(f"job {job}: no terminal state within 120 s (saw {seen})")


@pytest.mark.slurm
@pytest.mark.slow
async def test_leader_killed_while_jobs_run_and_waiters_wait(
    replicas: list[Replica], slurm_users: list[User], pg_dsn: str
) -> None:
    r1, r2 = replicas
    assert (await r1.health())["leader"] and not (await r2.health())["leader"]
    alice = slurm_users[0]
    jobs = [sbatch_as(alice, wrap=f"sleep {3 + i % 3}") for i in range(JOBS)]
    seen: dict[str, list[tuple[int, str]]] = {j: [] for j in jobs}
    tasks = [asyncio.create_task(waiter(j, [r1, r2], seen[j])) for j in jobs]
    # kill the leader once every waiter has seen its job in the cache
    deadline = time.monotonic() + 30
    while not all(seen.values()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert all(seen.values()), f"waiters saw nothing before the kill: {seen}"
    os.kill(r1.proc.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    r1.proc.wait(10)
    polls_then = (await r2.health())["scheduler_polls"]
    assert polls_then == 0, "the follower polled the scheduler"
    takeover = None
    while time.monotonic() < killed_at + 10:
        h = await r2.health()
        if h["leader"] and h["scheduler_polls"] > polls_then:
            takeover = time.monotonic() - killed_at
            break
        await asyncio.sleep(0.05)
    assert takeover is not None and takeover <= 5, f"r2 took over after {takeover} s"
    await asyncio.wait_for(asyncio.gather(*tasks), 120)

    async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
        cur = await conn.execute(
            "SELECT job_id, seq, body->>'state' FROM facility_status_log ORDER BY seq"
        )
        log: dict[str, list[tuple[int, str]]] = {}
        for job_id, seq, state in await cur.fetchall():
            log.setdefault(str(job_id), []).append((int(seq), str(state)))
    for j in jobs:
        # the first change a waiter can see is the one current when it first asked
        first = seen[j][0][0]
        expected = [c for c in log[j] if c[0] >= first]
        assert seen[j] == expected, f"job {j}: waiter saw {seen[j]}, log has {log[j]}"
        assert log[j][-1][1] == "COMPLETED", f"job {j} did not end COMPLETED in the log: {log[j]}"
        assert any(s == "RUNNING" for _, s in log[j]), f"job {j}: RUNNING missing: {log[j]}"
    print(f"takeover after {takeover:.2f} s")
