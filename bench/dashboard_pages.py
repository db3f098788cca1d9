"""Render time of each dashboard page over a large store.

Fills a fresh store with a day of synthetic activity (N status queries, N/10
commands, N/40 jobs, hook/policy decisions, lease, memory and index events),
then renders every page in-process (ASGI, no network) a few times and prints
the median. Bounded: one store, 9 pages x 3 renders.

    PYTHONPATH=src python bench/dashboard_pages.py [N]
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from typing import Any

import httpx

from tenantry.backends.fake import FakeBackend
from tenantry.core.events import Bus
from tenantry.core.settings import load
from tenantry.gateway.dashboard.routes import ensure_token, http_app
from tenantry.service.runtime import Runtime
from tenantry.store.journal import Journal

AGENTS = ("claude-code", "codex", "gemini-cli", "human")


def _insert(conn: Any, table: str, columns: str, rows: list[Any]) -> None:
    """Insert ``rows`` (tuples in the order of ``columns``) into ``table``."""
    marks = ",".join("?" * len(columns.split(",")))
    conn.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)


def fill(conn, n: int, now: float) -> None:  # type: ignore[no-untyped-def]
    rnd = random.Random(1)
    principals = [f"u{i}/{AGENTS[i % 4]}/s{i}" for i in range(200)]
    for i, p in enumerate(principals):
        u, a, s = p.split("/")
        conn.execute(
            "INSERT INTO sessions VALUES (?,?,?,?,?,?,?,?,?,?)",
            (p, 1000 + i, u, a, s, "login1", "proj", now - 86400, now - rnd.random() * 3600, 10),
        )
    ev = []
    for _ in range(n):
        ev.append(
            (
                now - rnd.random() * 86400,
                "status.query",
                rnd.choice(principals),
                "",
                "ok",
                None,
                json.dumps({"served_from": "cache", "jobs": 1}),
            )
        )
    for _ in range(n // 50):
        ev.append(
            (
                now - rnd.random() * 86400,
                "backend.poll",
                "",
                "",
                "ok",
                0.05,
                json.dumps({"jobs": 20}),
            )
        )
    for kind, outcome, data in (
        ("hook.decision", "deny", {"rule": "redirect.squeue", "command": "squeue -u x"}),
        ("policy.decision", "deny", {"rule": "no-sudo", "message": "no"}),
        ("memory.recall", "2", {"returned": ["a", "b"]}),
        ("index.query", "ok", {"results": 3}),
        ("command.finished", "completed", {"argv": ["make"], "where": "local"}),
    ):
        for _ in range(n // 20):
            ev.append(
                (
                    now - rnd.random() * 86400,
                    kind,
                    rnd.choice(principals),
                    "",
                    outcome,
                    0.01,
                    json.dumps(data),
                )
            )
    _insert(conn, "events", "ts, type, principal, subject, outcome, duration_s, data_json", ev)
    cmds = []
    for i in range(n // 10):
        t0 = now - rnd.random() * 86400
        cmds.append(
            (
                f"c{i}",
                rnd.choice(principals),
                1000,
                '["make", "-j4"]',
                "/w",
                "local",
                t0,
                t0 + 3,
                0,
                "completed",
                2.0,
            )
        )
    cols = "id, principal, uid, argv_json, cwd, where_run, started_at, ended_at, exit_code, state"
    _insert(conn, "commands", cols + ", cpu_s", cmds)
    jobs = []
    for i in range(n // 40):
        t0 = now - rnd.random() * 86400
        jobs.append(
            (
                f"t{i}",
                "slurm",
                str(i),
                "handed",
                "COMPLETED",
                rnd.choice(principals),
                1000,
                "job",
                "{}",
                f"h{i}",
                t0,
                t0 + 60,
                t0 + 600,
                '{"cpus": 4}',
                t0,
            )
        )
    cols = "id, backend, backend_id, phase, state, principal, uid, name, spec_json, spec_hash"
    _insert(
        conn,
        "jobs",
        cols + ", submitted_at, started_at, ended_at, resources_json, updated_at",
        jobs,
    )


async def main(n: int) -> None:
    state = tempfile.mkdtemp(prefix="tnt-bench-")
    settings = load(env={}, overrides={"state_dir": state, "socket": f"{state}/sock"})
    journal = Journal(settings.db_path)
    await journal.start()
    now = time.time()
    t0 = time.perf_counter()
    await journal.db.write(lambda c: fill(c, n, now))
    print(f"filled {n} status queries and the rest in {time.perf_counter() - t0:.1f} s")
    rt = Runtime(settings, journal, Bus(), FakeBackend())
    token = ensure_token(state)
    app = http_app(rt)
    headers = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://b") as c:
        for path in (
            "/",
            "/sessions",
            "/activity",
            "/scheduler",
            "/leases",
            "/policy",
            "/memory",
            "/report",
            "/session?key=u1/codex/s1",
        ):
            times = []
            for _ in range(3):
                t = time.perf_counter()
                r = await c.get(path, headers=headers)
                times.append(time.perf_counter() - t)
                assert r.status_code == 200, (path, r.status_code)
            print(f"{path:28} {1000 * statistics.median(times):8.0f} ms")
    await journal.aclose()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000))
