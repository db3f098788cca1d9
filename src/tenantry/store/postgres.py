"""The PostgreSQL engine (facility mode): psycopg 3, a writer thread, a read pool.

It keeps the SQLite engine's shape so one repository runs on both: writes run
one at a time in a thread that owns one connection, each in one transaction
(``fn(conn)`` is the same synchronous function the SQLite engine runs); reads
run on a ``psycopg_pool.ConnectionPool`` of connections whose transactions are
read-only. SQL is written with ``?`` placeholders and translated here. Several
replicas may share one database: migrations run under an advisory lock, so two
replicas starting together apply each migration once.

Errors leave as ``StoreError`` with the URL's password masked.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from tenantry.core.errors import StoreError, StoreUnavailable
from tenantry.store import engine
from tenantry.store.engine import Conn, Cursor, Migration, Row, Schema, StartClose, reject, resolve
from tenantry.store.url import mask_url, scrub

if TYPE_CHECKING:
    import psycopg
    import psycopg_pool

T = TypeVar("T")

# most queued writes that share one transaction (each in its own savepoint)
GROUP_MAX = 64

# one key for "migrating" across replicas (pg_advisory_xact_lock takes a bigint)
MIGRATION_LOCK = 0x7E4A47_0001

MIGRATIONS_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations (concept TEXT NOT NULL,"
    " version INTEGER NOT NULL, name TEXT NOT NULL, applied_at DOUBLE PRECISION NOT NULL,"
    " PRIMARY KEY (concept, version))"
)


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> str:
    """``?`` placeholders to psycopg's ``%s`` (and a literal ``%`` to ``%%``).

    ``?`` inside a quoted string or identifier is left alone.
    """
    out: list[str] = []
    quote = ""
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
            out.append("%%" if ch == "%" else ch)
        elif ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


class PgRow(tuple[Any, ...]):
    """A row by position or by column name, like ``sqlite3.Row``."""

    _names: dict[str, int]

    def __new__(cls, values: Sequence[Any], names: dict[str, int]) -> PgRow:
        row = super().__new__(cls, values)
        row._names = names
        return row

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self._names[key])
            except KeyError:
                raise IndexError(f"no column {key}") from None
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self._names)


def pg_row(cursor: Any) -> Callable[[Sequence[Any]], PgRow]:
    """psycopg row factory making ``PgRow``."""
    desc = cursor.description or []
    names = {d.name: i for i, d in enumerate(desc)}

    def make(values: Sequence[Any]) -> PgRow:
        return PgRow(values, names)

    return make


class PgConn:
    """The ``Conn`` a write or read function gets on PostgreSQL."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor:
        if parameters:
            return self._conn.execute(translate(sql), tuple(parameters))
        return self._conn.execute(sql)

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> Cursor:
        cur = self._conn.cursor()
        rows = [tuple(p) for p in seq_of_parameters]
        if rows:
            cur.executemany(translate(sql), rows)
        return _Many(cur, rows)


class _Many:
    """executemany's cursor: rowcount is 0 when there was nothing to run."""

    def __init__(self, cur: psycopg.Cursor[Any], rows: list[Any]) -> None:
        self._cur = cur
        self._ran = bool(rows)

    @property
    def rowcount(self) -> int:
        return self._cur.rowcount if self._ran else 0

    def fetchone(self) -> Any:
        return None

    def fetchall(self) -> list[Any]:
        return []

    def __iter__(self) -> Iterator[Any]:
        return iter(())


_Job = tuple[Callable[[PgConn], Any], "asyncio.Future[Any]"]


class PostgresStore(StartClose):
    """One PostgreSQL database (a URL, ``postgresql://user:pw@host/db``)."""

    engine = "postgresql"

    def __init__(
        self,
        url: str,
        schemas: Sequence[Schema] = (),
        *,
        readers: int = 2,
        connect_timeout_s: float = 10.0,
    ) -> None:
        self.url = url
        self._schemas = list(schemas)
        self._readers = max(1, readers)
        self._timeout = connect_timeout_s
        self._writes: queue.Queue[_Job | None] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._wconn: psycopg.Connection[Any] | None = None
        self._pool: psycopg_pool.ConnectionPool[Any] | None = None
        self._read_exec: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def where(self) -> str:
        return mask_url(self.url)

    def _error(self, what: str, exc: BaseException) -> StoreError:
        import psycopg

        down = isinstance(exc, psycopg.OperationalError | psycopg_pool_timeout())
        cls = StoreUnavailable if down else StoreError
        return cls(
            f"{what} ({self.where}): {scrub(str(exc).strip(), self.url)}",
            hint="check that PostgreSQL is running and the store_url is right"
            if down
            else "see the daemon log",
        )

    def _connect(self) -> psycopg.Connection[Any]:
        import psycopg

        return psycopg.connect(
            self.url,
            autocommit=True,
            row_factory=pg_row,
            connect_timeout=max(1, int(self._timeout)),
        )

    async def start(self) -> None:
        import psycopg
        import psycopg_pool

        loop = asyncio.get_running_loop()
        try:
            self._wconn = await loop.run_in_executor(None, self._connect)
            for schema in self._schemas:
                await loop.run_in_executor(None, _migrate, self._wconn, schema)
        except psycopg.Error as exc:
            await self._close_quietly()
            raise self._error("cannot open the database", exc) from exc
        except StoreError:
            await self._close_quietly()
            raise

        def readonly(conn: psycopg.Connection[Any]) -> None:
            conn.execute("SET default_transaction_read_only = on")

        pool: psycopg_pool.ConnectionPool[Any] = psycopg_pool.ConnectionPool(
            self.url,
            min_size=1,
            max_size=self._readers,
            open=False,
            configure=readonly,
            kwargs={
                "autocommit": True,
                "row_factory": pg_row,
                "connect_timeout": max(1, int(self._timeout)),
            },
            name="tenantry-read",
        )
        try:
            await loop.run_in_executor(None, functools.partial(pool.open, True, self._timeout))
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            with contextlib.suppress(Exception):
                pool.close()
            await self._close_quietly()
            raise self._error("cannot open the read pool", exc) from exc
        self._pool = pool
        self._read_exec = concurrent.futures.ThreadPoolExecutor(
            max_workers=self._readers, thread_name_prefix="db-reader"
        )
        self._writer = threading.Thread(target=self._write_loop, name="db-writer", daemon=True)
        self._writer.start()

    async def _close_quietly(self) -> None:
        if self._wconn is not None:
            with contextlib.suppress(Exception):
                self._wconn.close()
            self._wconn = None

    def _write_loop(self) -> None:
        """Run queued writes; those waiting together share one commit (group commit).

        Each write of a group runs in its own savepoint, so one that fails is
        rolled back alone; every write is acknowledged only after the commit.
        """
        while True:
            batch, stop = engine.next_group(self._writes, GROUP_MAX)
            if batch:
                self._run_group(batch)
            if stop:
                return

    def _run_group(self, batch: list[_Job]) -> None:
        import psycopg

        outcomes: list[tuple[bool, Any]] = []
        try:
            if self._wconn is None or self._wconn.broken or self._wconn.closed:
                if self._wconn is not None:
                    with contextlib.suppress(Exception):
                        self._wconn.close()
                self._wconn = self._connect()
            conn = self._wconn
            with conn.transaction():
                for fn, _ in batch:
                    try:
                        if len(batch) == 1:
                            outcomes.append((True, fn(PgConn(conn))))
                        else:
                            with conn.transaction():  # a savepoint
                                outcomes.append((True, fn(PgConn(conn))))
                    except BaseException as exc:
                        if len(batch) == 1 or not isinstance(exc, Exception):
                            raise
                        outcomes.append((False, exc))
        except BaseException as exc:
            err = _wrap(exc) if isinstance(exc, psycopg.Error) else exc
            outcomes = [(False, err)] * len(batch)
        for (_, fut), (ok, value) in zip(batch, outcomes, strict=True):
            if not ok and isinstance(value, psycopg.Error):
                value = _wrap(value)
            done = resolve if ok else reject
            fut.get_loop().call_soon_threadsafe(done, fut, value)

    async def _submit(self, fn: Callable[[PgConn], T]) -> T:
        if self._writer is None:
            raise StoreError("database is not open")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._writes.put((fn, fut))
        return await fut

    async def migrate(self, schema: Schema) -> None:
        def fn(conn: PgConn) -> None:
            _migrate(conn._conn, schema)

        try:
            await self._submit(fn)
        except _EngineError as exc:
            cause = exc.__cause__ or exc
            raise self._error(f"cannot migrate {schema.concept}", cause) from cause

    async def write(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn(conn)`` in one write transaction on the writer thread."""
        try:
            return await self._submit(fn)
        except _EngineError as exc:
            cause = exc.__cause__ or exc
            raise self._error("database write failed", cause) from cause

    async def read(self, fn: Callable[[Conn], T]) -> T:
        """Run ``fn(conn)`` on a read-only connection from the pool."""
        import psycopg

        pool = self._pool
        if pool is None or self._read_exec is None:
            raise StoreError("database is not open")

        def run() -> T:
            with pool.connection() as conn:
                return fn(PgConn(conn))

        try:
            return await asyncio.get_running_loop().run_in_executor(self._read_exec, run)
        except psycopg.Error as exc:
            raise self._error("database read failed", exc) from exc

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int:
        """One write statement; returns the number of rows it changed."""
        return await self.write(lambda c: int(c.execute(sql, args).rowcount))

    async def insert(self, sql: str, args: Sequence[Any] = ()) -> int:
        """One INSERT ... RETURNING <id>; returns that id."""
        if "returning" not in sql.lower():
            raise StoreError(
                "an insert whose id is wanted needs a RETURNING clause on PostgreSQL",
                hint="write INSERT ... RETURNING <key column> (SQLite reads it the same way)",
            )
        return await self.write(lambda c: int(c.execute(sql, args).fetchone()[0]))

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]:
        return await self.read(lambda c: list(c.execute(sql, args).fetchall()))

    async def fetchone(self, sql: str, args: Sequence[Any] = ()) -> Row | None:
        return await self.read(lambda c: c.execute(sql, args).fetchone())

    async def aclose(self) -> None:
        loop = asyncio.get_running_loop()
        if self._writer is not None:
            self._writes.put(None)
            await loop.run_in_executor(None, self._writer.join)
            self._writer = None
        if self._read_exec is not None:
            self._read_exec.shutdown(wait=True)
            self._read_exec = None
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await loop.run_in_executor(None, pool.close)
        await self._close_quietly()


class _EngineError(Exception):
    """A psycopg error raised by the writer (its ``__cause__``), to be translated."""


def psycopg_pool_timeout() -> type[Exception]:
    import psycopg_pool

    return psycopg_pool.PoolTimeout


def _wrap(exc: BaseException) -> BaseException:
    wrapped = _EngineError(str(exc))
    wrapped.__cause__ = exc
    return wrapped


def _migrate(conn: psycopg.Connection[Any], schema: Schema) -> None:
    migrations: list[Migration] = schema.migrations("postgresql")
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        conn.execute(MIGRATIONS_TABLE)
        rows = conn.execute(
            "SELECT version FROM schema_migrations WHERE concept = %s", (schema.concept,)
        ).fetchall()
    done = {int(r[0]) for r in rows}
    for version, name, sql in migrations:
        if version in done:
            continue
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            again = conn.execute(
                "SELECT 1 FROM schema_migrations WHERE concept = %s AND version = %s",
                (schema.concept, version),
            ).fetchone()
            if again is not None:  # another replica applied it meanwhile
                continue
            conn.execute(sql)
            conn.execute(
                "INSERT INTO schema_migrations VALUES (%s, %s, %s, %s)",
                (schema.concept, version, name, time.time()),
            )
