"""SQLite under asyncio: one writer thread, WAL, reads on a small pool.

``Database`` is the generic part every SQLite-backed concept uses (the main
store, the memory, the index each open their own file). Writes run in one
dedicated thread that owns the write connection, each inside
``BEGIN IMMEDIATE`` ... ``COMMIT``; reads run on a pool of read-only
connections. Schema changes are numbered plain-SQL migrations
(``NNNN_name.sql``) applied in order and recorded in ``schema_migrations``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from tenantry.core.errors import StoreError

T = TypeVar("T")

_PRAGMAS = (
    "PRAGMA journal_mode=WAL",
    "PRAGMA synchronous=NORMAL",
    "PRAGMA foreign_keys=ON",
    "PRAGMA busy_timeout=5000",
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


def load_migrations(package: str, folder: str = "migrations") -> list[tuple[int, str, str]]:
    """Read ``NNNN_name.sql`` files shipped in ``package/folder``, in order."""
    out: list[tuple[int, str, str]] = []
    root = resources.files(package).joinpath(folder)
    for entry in root.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            out.append((int(name[:4]), name, entry.read_text()))
    return sorted(out)


class Database:
    """One SQLite file: a writer thread and a read pool. Use ``async with``."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        migrations: Sequence[tuple[int, str, str]] = (),
        *,
        readers: int = 2,
    ) -> None:
        self.path = str(path)
        self._migrations = list(migrations)
        self._readers = readers
        self._writes: queue.Queue[tuple[Callable[[sqlite3.Connection], Any], Any] | None] = (
            queue.Queue()
        )
        self._writer: threading.Thread | None = None
        self._read_pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._read_conns: queue.Queue[sqlite3.Connection] = queue.Queue()
        self._all_read_conns: list[sqlite3.Connection] = []
        self._wconn: sqlite3.Connection | None = None

    async def __aenter__(self) -> Database:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        Path(self.path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            self._wconn = _connect(self.path, readonly=False)
            os.chmod(self.path, 0o600)
            self._migrate(self._wconn)
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

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations"
            " (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
        )
        done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
        for version, name, sql in self._migrations:
            if version in done:
                continue
            conn.execute("BEGIN IMMEDIATE")
            try:
                for stmt in _split_sql(sql):
                    conn.execute(stmt)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, julianday('now'))",
                    (version, name),
                )
                conn.execute("COMMIT")
            except sqlite3.Error:
                conn.execute("ROLLBACK")
                raise

    def _write_loop(self) -> None:
        conn = self._wconn
        assert conn is not None
        while True:
            item = self._writes.get()
            if item is None:
                return
            fn, fut = item
            try:
                conn.execute("BEGIN IMMEDIATE")
                result = fn(conn)
                conn.execute("COMMIT")
            except BaseException as exc:
                # a failed COMMIT (disk full) leaves the transaction open: end it,
                # or every later write would fail with "within a transaction"
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                fut.get_loop().call_soon_threadsafe(_set_exc, fut, exc)
            else:
                fut.get_loop().call_soon_threadsafe(_set_result, fut, result)

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(conn)`` in one write transaction on the writer thread."""
        if self._writer is None:
            raise StoreError("database is not open")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._writes.put((fn, fut))
        try:
            return await fut
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

        def fn(conn: sqlite3.Connection) -> int:
            return int(conn.execute(sql, args).rowcount)

        return await self.write(fn)

    async def insert(self, sql: str, args: Sequence[Any] = ()) -> int:
        """One INSERT; returns the new row's rowid."""

        def fn(conn: sqlite3.Connection) -> int:
            return int(conn.execute(sql, args).lastrowid or 0)

        return await self.write(fn)

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return await self.read(lambda c: list(c.execute(sql, args)))

    async def fetchone(self, sql: str, args: Sequence[Any] = ()) -> sqlite3.Row | None:
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


def _set_result(fut: asyncio.Future[Any], value: Any) -> None:
    if not fut.done():
        fut.set_result(value)


def _set_exc(fut: asyncio.Future[Any], exc: BaseException) -> None:
    if not fut.done():
        fut.set_exception(exc)


def _split_sql(sql: str) -> list[str]:
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
