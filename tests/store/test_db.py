from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from tenantry.core.errors import StoreError
from tenantry.store.db import Database, _split_sql

MIGRATIONS = [
    (1, "0001_a.sql", "CREATE TABLE t (x INTEGER);\nCREATE INDEX t_x ON t (x);"),
    (2, "0002_b.sql", "ALTER TABLE t ADD COLUMN y TEXT DEFAULT 'a;b';"),
]


async def test_migrations_apply_once_and_writes_are_serialised(tmp_path: Path) -> None:
    path = tmp_path / "db.sqlite3"
    async with Database(path, MIGRATIONS) as db:
        await asyncio.gather(
            *(db.execute("INSERT INTO t (x) VALUES (?)", (i,)) for i in range(200))
        )
        rows = await db.fetchall("SELECT COUNT(*) AS n, SUM(x) AS s FROM t")
        assert (rows[0]["n"], rows[0]["s"]) == (200, sum(range(200)))
        assert (await db.fetchone("SELECT y FROM t LIMIT 1"))["y"] == "a;b"  # type: ignore[index]
    async with Database(path, MIGRATIONS) as db:  # reopening applies nothing twice
        versions = await db.fetchall("SELECT version FROM schema_migrations")
        assert [r[0] for r in versions] == [1, 2]
    assert path.stat().st_mode & 0o777 == 0o600
    mode = sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


async def test_failed_write_rolls_back(tmp_path: Path) -> None:
    async with Database(tmp_path / "d.sqlite3", MIGRATIONS) as db:

        def bad(c: sqlite3.Connection) -> None:
            c.execute("INSERT INTO t (x) VALUES (1)")
            c.execute("INSERT INTO nope VALUES (1)")

        with pytest.raises(StoreError):
            await db.write(bad)
        assert (await db.fetchone("SELECT COUNT(*) FROM t"))[0] == 0  # type: ignore[index]


async def test_reads_are_read_only(tmp_path: Path) -> None:
    async with Database(tmp_path / "d.sqlite3", MIGRATIONS) as db:
        with pytest.raises(StoreError):
            await db.read(lambda c: c.execute("INSERT INTO t (x) VALUES (1)"))


def test_split_sql_respects_strings() -> None:
    assert _split_sql("SELECT ';';\nSELECT 2;") == ["SELECT ';';", "SELECT 2;"]
