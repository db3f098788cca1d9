"""The store contract: one suite, run against every store implementation.

``StoreContract`` holds the cases; each implementation subclasses it and says
how to open a store (``open_store``) and how a child process imports it
(``IMPORT``). Today that is the SQLite store (``tenantry.store.db.Database``);
the PostgreSQL store of facility mode subclasses it the same way. The cases use
the statement-level verbs (``execute``, ``insert``, ``fetchall``, ``fetchone``)
and ``write(fn)`` transactions, so they read the same on either engine.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tenantry.core.errors import StoreError
from tenantry.store.db import Database, load_migrations

Migration = tuple[int, str, str]
SCHEMA: list[Migration] = [
    (1, "0001_items.sql", "CREATE TABLE items (k INTEGER PRIMARY KEY, v TEXT NOT NULL);"),
    (
        2,
        "0002_counter.sql",
        "CREATE TABLE counter (n INTEGER NOT NULL);\nINSERT INTO counter VALUES (0);",
    ),
]
# every concept that keeps its own migrations ships them in <package>/migrations
CONCEPT_MIGRATIONS = (
    "tenantry.store",
    "tenantry.memory",
    "tenantry.index",
    "tenantry.leases",
    "tenantry.safety.budgets",
    "tenantry.safety.kill",
)


def _writers() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "db-writer")


class StoreContract:
    """What every store does. Subclasses provide ``open_store`` and ``IMPORT``."""

    # a line a child process runs to bind ``Store`` to this implementation
    IMPORT = ""

    def open_store(self, path: Path, migrations: Sequence[Migration]) -> Database:
        raise NotImplementedError

    def journal_mode(self, path: Path) -> str:
        raise NotImplementedError

    async def table_names(self, db: Database) -> set[str]:
        raise NotImplementedError

    def intact(self, path: Path) -> bool:
        """The engine's own consistency check of the files at ``path``."""
        raise NotImplementedError

    # -- migrations ---------------------------------------------------------------
    async def test_migrations_apply_in_order_once(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db"
        async with self.open_store(path, SCHEMA[:1]) as db:
            await db.insert("INSERT INTO items (k, v) VALUES (?, ?)", (1, "a"))
        async with self.open_store(path, SCHEMA) as db:  # a newer release adds one
            rows = await db.fetchall("SELECT version, name FROM schema_migrations ORDER BY 1")
            assert [(r[0], r[1]) for r in rows] == [(1, "0001_items.sql"), (2, "0002_counter.sql")]
            assert (await db.fetchone("SELECT v FROM items WHERE k = 1")) is not None
        async with self.open_store(path, SCHEMA) as db:  # reopening applies nothing again
            assert [r[0] for r in await db.fetchall("SELECT n FROM counter")] == [0]

    async def test_a_failing_migration_is_not_recorded(self, tmp_path: Path) -> None:
        path = tmp_path / "s.db"
        broken = [*SCHEMA[:1], (2, "0002_bad.sql", "CREATE TABLE ok (a);\nCREATE TABLE items (x);")]
        db = self.open_store(path, broken)
        with pytest.raises(StoreError):
            await db.start()
        await db.aclose()
        async with self.open_store(path, SCHEMA) as db:
            rows = await db.fetchall("SELECT version FROM schema_migrations ORDER BY 1")
            assert [r[0] for r in rows] == [1, 2]
            assert "ok" not in await self.table_names(
                db
            )  # the failed migration left nothing behind

    @pytest.mark.parametrize("package", CONCEPT_MIGRATIONS)
    async def test_every_concepts_migrations_apply_on_a_fresh_store(
        self, tmp_path: Path, package: str
    ) -> None:
        migrations = load_migrations(package)
        assert migrations, f"{package} ships no migrations"
        assert [m[0] for m in migrations] == sorted({m[0] for m in migrations})
        path = tmp_path / "s.db"
        for _ in range(2):
            async with self.open_store(path, migrations) as db:
                rows = await db.fetchall("SELECT version FROM schema_migrations")
                assert sorted(r[0] for r in rows) == [m[0] for m in migrations]

    # -- durability and file modes -----------------------------------------------
    async def test_write_ahead_log_and_private_files(self, tmp_path: Path) -> None:
        path = tmp_path / "state" / "s.db"  # the store makes its directory
        async with self.open_store(path, SCHEMA) as db:
            await db.insert("INSERT INTO items (k, v) VALUES (?, ?)", (1, "a"))
            assert self.journal_mode(path) == "wal"
            files = [p for p in path.parent.iterdir() if p.name.startswith("s.db")]
            assert path in files
            for f in files:
                assert stat.S_IMODE(f.stat().st_mode) == 0o600, f
            assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700

    # -- the writer ---------------------------------------------------------------
    async def test_writes_are_serialised_and_in_order(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path / "s.db", SCHEMA) as db:

            def bump(conn: Any) -> int:
                (n,) = conn.execute("SELECT n FROM counter").fetchone()
                time.sleep(0.001)  # widen the window a lost update would need
                conn.execute("UPDATE counter SET n = ?", (n + 1,))
                return int(n) + 1

            seen = await asyncio.gather(*(db.write(bump) for _ in range(40)))
            assert sorted(seen) == list(range(1, 41))
            assert (await db.fetchone("SELECT n FROM counter"))[0] == 40  # type: ignore[index]
            ids = await asyncio.gather(
                *(db.insert("INSERT INTO items (v) VALUES (?)", (str(i),)) for i in range(20))
            )
            rows = await db.fetchall("SELECT k, v FROM items ORDER BY k")
            assert [r[1] for r in rows] == [str(i) for i in range(20)]
            assert list(ids) == [r[0] for r in rows]

    async def test_a_failed_write_rolls_back_and_the_store_goes_on(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path / "s.db", SCHEMA) as db:

            def half(conn: Any) -> None:
                conn.execute("INSERT INTO items (k, v) VALUES (1, 'a')")
                raise ValueError("changed my mind")

            with pytest.raises(ValueError, match="changed my mind"):
                await db.write(half)
            with pytest.raises(StoreError):  # an engine error is translated
                await db.execute("INSERT INTO items (k, v) VALUES (1, NULL)")
            assert await db.fetchall("SELECT * FROM items") == []
            await db.insert("INSERT INTO items (k, v) VALUES (?, ?)", (1, "b"))
            assert (await db.fetchone("SELECT v FROM items"))[0] == "b"  # type: ignore[index]

    async def test_reads_cannot_write(self, tmp_path: Path) -> None:
        async with self.open_store(tmp_path / "s.db", SCHEMA) as db:
            with pytest.raises(StoreError):
                await db.read(lambda c: c.execute("INSERT INTO items (v) VALUES ('x')"))

    # -- close ----------------------------------------------------------------------
    async def test_close_stops_the_writer_and_refuses_further_use(self, tmp_path: Path) -> None:
        before = _writers()
        db = self.open_store(tmp_path / "s.db", SCHEMA)
        await db.start()
        assert _writers() == before + 1
        await db.insert("INSERT INTO items (v) VALUES ('a')")
        await db.aclose()
        assert _writers() == before
        with pytest.raises(StoreError):
            await db.execute("INSERT INTO items (v) VALUES ('b')")
        with pytest.raises(StoreError):
            await db.fetchall("SELECT * FROM items")
        await db.aclose()  # twice is fine
        async with self.open_store(tmp_path / "s.db", SCHEMA) as again:
            assert len(await again.fetchall("SELECT * FROM items")) == 1

    # -- crash --------------------------------------------------------------------
    def test_a_killed_writer_keeps_every_acknowledged_write_and_no_partial_one(
        self, tmp_path: Path
    ) -> None:
        path = tmp_path / "s.db"
        child = textwrap.dedent(
            f"""
            import asyncio, sys, time
            {self.IMPORT}
            SCHEMA = {SCHEMA!r}

            async def main():
                db = Store(sys.argv[1], SCHEMA)
                await db.start()
                for i in range(25):
                    await db.insert("INSERT INTO items (k, v) VALUES (?, ?)", (i, "ok"))
                    print(i, flush=True)

                def hang(conn):
                    conn.execute("INSERT INTO items (k, v) VALUES (999, 'partial')")
                    print("inside", flush=True)
                    time.sleep(120)

                await db.write(hang)

            asyncio.run(main())
            """
        )
        proc = subprocess.Popen(
            [sys.executable, "-c", child, str(path)], stdout=subprocess.PIPE, text=True
        )
        assert proc.stdout is not None
        acked: list[str] = []
        deadline = time.monotonic() + 60
        for line in proc.stdout:
            acked.append(line.strip())
            if line.strip() == "inside" or time.monotonic() > deadline:
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
        assert acked[-1] == "inside", acked

        async def reopen() -> list[int]:
            async with self.open_store(path, SCHEMA) as db:
                return [int(r[0]) for r in await db.fetchall("SELECT k FROM items ORDER BY k")]

        assert asyncio.run(reopen()) == [int(a) for a in acked[:-1]] == list(range(25))
        assert self.intact(path)


class TestSQLiteStore(StoreContract):
    IMPORT = "from tenantry.store.db import Database as Store"

    def open_store(self, path: Path, migrations: Sequence[Migration]) -> Database:
        return Database(path, migrations)

    def journal_mode(self, path: Path) -> str:
        conn = sqlite3.connect(path)
        try:
            return str(conn.execute("PRAGMA journal_mode").fetchone()[0])
        finally:
            conn.close()

    async def table_names(self, db: Database) -> set[str]:
        return {r[0] for r in await db.fetchall("SELECT name FROM sqlite_master")}

    def intact(self, path: Path) -> bool:
        conn = sqlite3.connect(path)
        try:
            return bool(conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok")
        finally:
            conn.close()
