"""A daemon opens the state of a release that kept one SQLite file per concept.

The old layout: ``tenantry.sqlite3`` (journal) plus ``kill.sqlite3``,
``budgets.sqlite3``, ``memory.sqlite3`` and ``leases.sqlite3``, each with a
one-concept ``schema_migrations (version, name, applied_at)``. The files are
built here the way that release built them (its migrations, its table names)
and the real daemon runtime is opened on the directory.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tenantry.backends.fake import FakeBackend
from tenantry.core.errors import StoreError
from tenantry.core.settings import load
from tenantry.gateway.app import open_runtime
from tenantry.memory.component import MemoryService
from tenantry.safety.kill.component import KillSwitch
from tenantry.store import Schema
from tenantry.store.engine import load_migrations
from tenantry.store.legacy import IMPORTED_SUFFIX
from tenantry.store.sqlite import SQLiteStore, split_sql


def old_file(path: Path, package: str, upto: int, rows: list[str]) -> None:
    """A file as the one-file-per-concept release left it."""
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE schema_migrations"
        " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    for version, name, sql in load_migrations(package):
        if version > upto:
            break
        sql = sql.replace("CREATE TABLE budget_leases", "CREATE TABLE leases")  # its old name
        for stmt in split_sql(sql):
            conn.execute(stmt)
        conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (version, name))
    for stmt in rows:
        conn.execute(stmt)
    conn.commit()
    conn.close()


LESSON = (
    "INSERT INTO lessons (id, kind, scope, owner_user, owner_key, title, body, trust,"
    " trust_rank, status, ttl_days, created_at, updated_at)"
    " VALUES ('L1', 'fact', 'facility', 'ann', 'ann/human/-', 'gcc module',"
    " 'load gcc first', 'staff-approved', 3, 'active', 90, 1, 1)"
)


def old_state(state: Path) -> None:
    state.mkdir(mode=0o700)
    old_file(
        state / "tenantry.sqlite3",
        "tenantry.store",
        3,
        [
            "INSERT INTO jobs (id, backend, backend_id, phase, state, principal, uid, spec_json,"
            " spec_hash, submitted_at, updated_at) VALUES ('t7', 'fake', '77', 'handed',"
            " 'COMPLETED', 'ann/codex/s', 1000, '{}', 'h', 1, 1)"
        ],
    )
    old_file(
        state / "kill.sqlite3",
        "tenantry.safety.kill",
        1,
        [
            "INSERT INTO stops (kind, target, owner, by, reason, stopped_at)"
            " VALUES ('user', 'bob', '*', 'ops/human/-', 'runaway', 5)"
        ],
    )
    old_file(
        state / "budgets.sqlite3",
        "tenantry.safety.budgets",
        1,
        [
            "INSERT INTO usage (ts, user, principal, metric, amount)"
            " VALUES (1, 'ann', 'ann/codex/s', 'jobs', 3)",
            "INSERT INTO leases VALUES ('L9', 'ann', 'ann/codex/s', 1)",
        ],
    )
    # memory at schema 2: the trusted tier (3) is built after the rows are in
    old_file(
        state / "memory.sqlite3",
        "tenantry.memory",
        2,
        [
            LESSON,
            "INSERT INTO lessons_fts (rowid, title, body, subjects, signature)"
            " VALUES (1, 'gcc module', 'load gcc first', '', '')",
        ],
    )


async def test_the_daemon_imports_each_concepts_old_file_once(tmp_path: Path) -> None:
    state = tmp_path / "state"
    old_state(state)
    settings = load(
        env={},
        overrides={"state_dir": str(state), "backend": "fake", "policy_file": ""},
    )
    async with open_runtime(settings, FakeBackend()) as rt:
        job = await rt.journal.get_job("77")
        assert job is not None and job.id == "t7"
        new = await rt.store.fetchone("SELECT n FROM counters WHERE name = 'jobs'")
        assert new is not None and new[0] == 7  # the next job is t8
        kill = rt.component("kill", KillSwitch)
        assert [(s.kind, s.target, s.reason) for s in kill._stops] == [("user", "bob", "runaway")]
        usage = await rt.store.fetchone('SELECT "user", amount FROM usage')
        assert usage is not None and tuple(usage) == ("ann", 3.0)
        held = await rt.store.fetchall("SELECT lease_id FROM budget_leases")
        assert [r[0] for r in held] == ["L9"]
        memory = rt.component("memory", MemoryService)
        lesson = await memory.store.get("L1")
        assert lesson is not None and lesson.title == "gcc module"
        tier = await rt.store.fetchall("SELECT rowid FROM trusted_fts")
        assert [r[0] for r in tier] == [1]  # migration 3 ran over the imported rows
        assert memory.store.df.get("gcc") == 1
        rows = await rt.store.fetchall(
            "SELECT concept, max(version) FROM schema_migrations GROUP BY concept ORDER BY 1"
        )
        assert {r[0]: r[1] for r in rows} == {
            "budgets": 1,
            "journal": 4,
            "kill": 1,
            "leases": 1,
            "memory": 3,
        }
    names = sorted(p.name for p in state.iterdir() if p.name.endswith(IMPORTED_SUFFIX))
    assert names == [f"{n}.sqlite3{IMPORTED_SUFFIX}" for n in ("budgets", "kill", "memory")]
    assert not (state / "kill.sqlite3").exists()
    # the next start reads the one database only
    async with open_runtime(settings, FakeBackend()) as rt:
        assert len(rt.component("kill", KillSwitch)._stops) == 1
        assert (await rt.store.fetchone("SELECT count(*) FROM usage"))[0] == 1  # type: ignore[index]


async def test_an_old_file_from_a_newer_release_is_refused(tmp_path: Path) -> None:
    old_file(tmp_path / "kill.sqlite3", "tenantry.safety.kill", 1, [])
    conn = sqlite3.connect(tmp_path / "kill.sqlite3")
    conn.execute("INSERT INTO schema_migrations VALUES (9, '0009_future.sql', 0)")
    conn.commit()
    conn.close()
    kill = Schema("kill", "tenantry.safety.kill", legacy_file="kill.sqlite3")
    async with SQLiteStore(tmp_path / "tenantry.sqlite3") as db:
        with pytest.raises(StoreError, match="written by a newer Tenantry"):
            await db.migrate(kill)
    assert (tmp_path / "kill.sqlite3").exists()  # left as it was
