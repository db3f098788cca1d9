"""The SQLite engine: one writer thread, WAL, reads on a small pool.

Writes run in one dedicated thread that owns the write connection, each inside
``BEGIN IMMEDIATE`` ... ``COMMIT``; reads run on a pool of read-only
connections. The file and its directory are private (0600 / 0700). Several
concepts share one file: each applies its own numbered migrations, recorded
per concept in ``schema_migrations``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from tenantry.core.errors import StoreError
from tenantry.store import engine
from tenantry.store.engine import Conn, Migration, Row, Schema, StartClose, reject, resolve

T = TypeVar("T")

_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
)

MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (concept TEXT NOT NULL,"
    " version INTEGER NOT NULL, name TEXT NOT NULL, applied_at REAL NOT NULL,"
    " PRIMARY KEY (concept, version))"
)


def _connect(path: str, *, readonly: bool) -> sqlite3.Connection:
    if readonly:
        conn = sqlite3.connect(
            f"file:{path}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )
    else:
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.row_factory = sqlite3.Row
    for pragma in _PRAGMAS:
        if readonly and "journal_mode" in pragma:
            continue
        conn.execute(pragma)
    return conn


def as_schemas(schemas: Sequence[Schema] | Sequence[Migration]) -> list[Schema]:
    """Schemas, or a bare list of migrations (one unnamed concept, ``main``)."""
    out: list[Schema] = []
    bare: list[Migration] = []
    for item in schemas:
        if isinstance(item, Schema):
            out.append(item)
        else:
            bare.append(item)
    if bare:
        out.insert(0, Schema("main", inline={"*": tuple(bare)}))
    return out


_Job = tuple[Callable[[sqlite3.Connection], Any], "asyncio.Future[Any]", bool]
# most queued writes that share one transaction (each in its own savepoint)
GROUP_MAX = 64


def _settle(settled: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for fut, ok, value in settled:
        (resolve if ok else reject)(fut, value)


class SQLiteStore(StartClose):
    """One SQLite file: a writer thread and a read pool. Use ``async with``."""

    engine = "sqlite"

    def __init__(
        self,
        path: str | os.PathLike[str],
        schemas: Sequence[Schema] | Sequence[Migration] = (),
        *,
        readers: int = 2,
    ) -> None:
        self.path = str(path)
        self._schemas = as_schemas(schemas)
        self._readers = readers
        self._writes: queue.Queue[_Job | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._read_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._read_conns: queue.Queue[sqlite3.Connection] = queue.Queue()
        self._all_read_conns: list[sqlite3.Connection] = []
        self._wconn: sqlite3.Connection | None = None

    @property
    def where(self) -> str:
        return self.path

    async def start(self) -> None:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self._wconn = _connect(self.path, readonly=False)
            os.chmod(self.path, 0o600)
            if not _legacy_table(self._wconn):
                self._wconn.execute(MIGRATIONS_TABLE)
            for schema in self._schemas:
                _migrate(self._wconn, schema, self.path)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open database {self.path}: {exc}") from exc
        self._writer = threading.Thread(target=self._write_loop, name="db-writer", daemon=True)
        self._writer.start()
        for _ in range(self._readers):
            conn = _connect(self.path, readonly=True)
            self._all_read_conns.append(conn)
            self._read_conns.put(conn)
        self._read_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._readers, thread_name_prefix="db-reader"
        )

    async def migrate(self, schema: Schema) -> None:
        """Apply ``schema``'s migrations not yet applied (and import its legacy file once)."""

        def fn(conn: sqlite3.Connection) -> None:
            _migrate(conn, schema, self.path)

        try:
            await self._submit(fn, transaction=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot migrate {schema.concept} in {self.path}: {exc}") from exc

    def _write_loop(self) -> None:
        """Run queued writes; those waiting together share one commit (group commit).

        Each write of a group runs in its own savepoint, so one that fails is
        rolled back alone; every write is acknowledged only after the commit.
        """
        while True:
            batch, stop = engine.next_group(self._writes, GROUP_MAX)
            start = 0
            for i in range(1, len(batch) + 1):  # a migration (no transaction) runs alone
                if i == len(batch) or not batch[i][2] or not batch[start][2]:
                    self._run_group(batch[start:i])
                    start = i
            if stop:
                return

    def _run_group(self, batch: list[_Job]) -> None:
        conn = self._wconn
        assert conn is not None
        outcomes: list[tuple[bool, Any]] = []
        transaction = batch[0][2]
        alone = len(batch) == 1
        try:
            if transaction:
                conn.execute("BEGIN IMMEDIATE")
            for fn, _, _ in batch:
                if alone:
                    outcomes.append((True, fn(conn)))
                    continue
                conn.execute("SAVEPOINT w")
                try:
                    outcomes.append((True, fn(conn)))
                except Exception as exc:
                    conn.execute("ROLLBACK TO w")
                    outcomes.append((False, exc))
                conn.execute("RELEASE w")
            if transaction:
                conn.execute("COMMIT")
        except BaseException as exc:
            # a failed COMMIT (disk full) leaves the transaction open: end it,
            # or every later write would fail with "within a transaction"
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            outcomes = [(False, exc)] * len(batch)
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]]
        by_loop = {}
        for (_, fut, _), (ok, value) in zip(batch, outcomes, strict=True):
            by_loop.setdefault(fut.get_loop(), []).append((fut, ok, value))
        for loop, settled in by_loop.items():  # one wake-up of each waiting loop
            loop.call_soon_threadsafe(_settle, settled)

    async def _submit(self, fn: Callable[[sqlite3.Connection], T], *, transaction: bool) -> T:
        if self._writer is None:
            raise StoreError("database is not open")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._writes.put((fn, fut, transaction))
        return await fut

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in one write transaction on the writer thread.

        ``fn`` may take the seam's ``Conn`` or, in SQLite-only code, the
        ``sqlite3.Connection`` itself.
        """
        try:
            return await self._submit(fn, transaction=True)
        except sqlite3.Error as exc:
            full = "full" in str(exc).lower()
            raise StoreError(
                f"database write failed: {exc}",
                hint=f"free space on the file system of {self.path}; nothing was written"
                if full
                else "see the daemon log",
            ) from exc

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` on a read-only connection from the pool."""
        if self._read_pool is None:
            raise StoreError("database is not open")

        def run() -> T:
            conn = self._read_conns.get()
            try:
                return fn(conn)
            finally:
                self._read_conns.put(conn)

        try:
            return await asyncio.get_running_loop().run_in_executor(self._read_pool, run)
        except sqlite3.Error as exc:
            raise StoreError(f"database read failed: {exc}") from exc

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        """One write statement; returns the number of rows it changed."""
        return await self.write(lambda c: int(c.execute(sql, args).rowcount))

    async def insert(self, sql: str, args: Sequence[Any] = ()) -> int:
        """One INSERT; returns its ``RETURNING`` value, else the new row's rowid."""
        returning = "returning" in sql.lower()

        def fn(conn: Conn) -> int:
            cur = conn.execute(sql, args)
            if returning:
                return int(cur.fetchone()[0])
            return int(cast(sqlite3.Cursor, cur).lastrowid or 0)

        return await self.write(fn)

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return await self.read(lambda c: list(c.execute(sql, args)))

    async def fetchone(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        return await self.read(lambda c: c.execute(sql, args).fetchone())

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writes.put(None)
            await asyncio.get_running_loop().run_in_executor(None, self._writer.join)
            self._writer = None
        if self._read_pool is not None:
            self._read_pool.shutdown(wait=True)
            self._read_pool = None
        for conn in self._all_read_conns:
            conn.close()
        self._all_read_conns.clear()
        if self._wconn is not None:
            self._wconn.close()
            self._wconn = None


def _legacy_table(conn: sqlite3.Connection) -> bool:
    cols = [r[1] for r in conn.execute("PRAGMA table_info(schema_migrations)")]
    return bool(cols) and "concept" not in cols


def _upgrade_migrations_table(conn: sqlite3.Connection, concept: str) -> None:
    """Move the records of a one-concept file (no ``concept`` column) to ``concept``."""
    if not _legacy_table(conn):
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute("ALTER TABLE schema_migrations RENAME TO schema_migrations_v1")
        conn.execute(MIGRATIONS_TABLE)
        conn.execute(
            "INSERT INTO schema_migrations SELECT ?, version, name, applied_at"
            " FROM schema_migrations_v1",
            (concept,),
        )
        conn.execute("DROP TABLE schema_migrations_v1")
        conn.execute("COMMIT")
    except sqlite3.Error:
        conn.execute("ROLLBACK")
        raise


def _applied(conn: sqlite3.Connection, concept: str) -> set[int]:
    rows = conn.execute("SELECT version FROM schema_migrations WHERE concept = ?", (concept,))
    return {int(r[0]) for r in rows}


def _apply(conn: sqlite3.Connection, concept: str, migration: Migration) -> None:
    version, name, sql = migration
    conn.execute("BEGIN IMMEDIATE")
    try:
        for stmt in split_sql(sql):
            conn.execute(stmt)
        conn.execute(
            "INSERT INTO schema_migrations VALUES (?, ?, ?, ?)",
            (concept, version, name, time.time()),
        )
        conn.execute("COMMIT")
    except sqlite3.Error:
        conn.execute("ROLLBACK")
        raise


def _migrate(conn: sqlite3.Connection, schema: Schema, db_path: str) -> None:
    from tenantry.store import legacy

    # a file from before concepts shared one: its records are the first migrating concept's
    _upgrade_migrations_table(conn, schema.concept)
    migrations = schema.migrations("sqlite")
    done = _applied(conn, schema.concept)
    old = legacy.legacy_path(db_path, schema) if not done else None
    upto = legacy.version_of(old) if old is not None else 0
    newest = max((m[0] for m in migrations), default=0)
    if upto > newest:
        raise StoreError(
            f"{old} was written by a newer Tenantry (schema {upto} > {newest})",
            hint="run the newer Tenantry, or move that file away to start afresh",
        )
    for m in migrations:
        if m[0] <= upto and m[0] not in done:
            _apply(conn, schema.concept, m)
    if old is not None:
        legacy.import_file(conn, old, schema)
    for m in migrations:
        if m[0] not in done and m[0] > upto:
            _apply(conn, schema.concept, m)


def split_sql(sql: str) -> list[str]:
    """Split a migration into statements (``sqlite3.complete_statement`` aware)."""
    out: list[str] = []
    buf = ""
    for line in sql.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
