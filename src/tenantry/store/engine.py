"""The store seam: what every engine (SQLite, PostgreSQL) offers a repository.

A repository (``store/journal.py``, ``memory/store.py``, ``safety/kill/store.py``, ...)
owns the SQL of its concept's tables and reaches the database only through a
``Store``:

- ``await store.write(fn)`` runs ``fn(conn)`` in one write transaction, one at a
  time per store (a writer thread); an exception inside ``fn`` rolls it back;
- ``await store.read(fn)`` runs ``fn(conn)`` on a read-only connection;
- ``execute`` / ``insert`` / ``fetchall`` / ``fetchone`` are one-statement shortcuts;
- ``await store.migrate(schema)`` applies a concept's numbered migrations once.

``conn`` is a ``Conn``: ``execute(sql, args)`` and ``executemany(sql, rows)``
returning a cursor with ``fetchone``/``fetchall``/``rowcount``. SQL is written
once with ``?`` placeholders; the PostgreSQL engine translates them. Rows are
read by position or by column name (``row["id"]``, ``dict(row)``).

A concept declares its schema as a ``Schema``: numbered ``NNNN_name.sql`` files
in ``<package>/migrations/``, used by every engine, and per-engine files in
``<package>/migrations/<engine>/`` that replace (same number) or add to them.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, Protocol, TypeVar

T = TypeVar("T")

Migration = tuple[int, str, str]
"""(version, file name, SQL)."""

ENGINES = ("sqlite", "postgresql")


class Row(Protocol):
    """One result row: by position or by column name; ``dict(row)`` works."""

    def __getitem__(self, key: Any, /) -> Any: ...

    def keys(self) -> list[str]: ...

    def __iter__(self) -> Iterator[Any]: ...

    def __len__(self) -> int: ...


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """The connection a ``write``/``read`` function receives (one engine's adapter)."""

    def execute(self, sql: str, parameters: Any = ..., /) -> Cursor: ...

    def executemany(self, sql: str, seq_of_parameters: Iterable[Any], /) -> Cursor: ...


@dataclass(frozen=True, slots=True)
class Schema:
    """A concept's tables: its name (the key of its migration records) and SQL files.

    ``package`` holds ``folder/NNNN_*.sql``; ``inline`` gives migrations in code
    (tests), per engine. ``engines`` limits where the concept can live (a
    concept built on SQLite's FTS5 names only ``sqlite``). ``legacy_file`` is the
    file the concept used to keep alone in the state directory: the SQLite
    engine imports it once into the daemon's database (see ``store.legacy``).
    ``renames`` maps a table's name in that old file to its name now.
    """

    concept: str
    package: str = ""
    folder: str = "migrations"
    inline: dict[str, tuple[Migration, ...]] = field(default_factory=dict)
    engines: tuple[str, ...] = ENGINES
    legacy_file: str = ""
    renames: dict[str, str] = field(default_factory=dict)

    def migrations(self, engine: str) -> list[Migration]:
        if engine not in self.engines:
            from tenantry.core.errors import StoreError

            raise StoreError(
                f"{self.concept} keeps its data only in {', '.join(self.engines)}, not {engine}",
                hint="give that concept its own embedded store (a sqlite:/// store_url)",
            )
        if self.inline:
            return sorted(self.inline.get(engine, self.inline.get("*", ())))
        return load_migrations(self.package, self.folder, engine=engine)


def _sql_files(root: Traversable) -> dict[int, tuple[str, str]]:
    out: dict[int, tuple[str, str]] = {}
    if not root.is_dir():
        return out
    for entry in root.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit() and entry.is_file():
            out[int(name[:4])] = (name, entry.read_text())
    return out


def load_migrations(
    package: str, folder: str = "migrations", *, engine: str = "sqlite"
) -> list[Migration]:
    """``NNNN_name.sql`` of ``package/folder``, overlaid with ``folder/<engine>/``, in order."""
    root = resources.files(package).joinpath(folder)
    files = _sql_files(root)
    files.update(_sql_files(root.joinpath(engine)))
    return sorted((v, name, sql) for v, (name, sql) in files.items())


class Store(Protocol):
    """One database. Open with ``async with`` (or ``start``/``aclose``)."""

    engine: str
    """``sqlite`` or ``postgresql``: for the few statements that must differ."""

    @property
    def where(self) -> str:
        """Where the data lives, fit for a message: a path or a URL without password."""
        ...

    async def start(self) -> None: ...

    async def aclose(self) -> None: ...

    async def __aenter__(self) -> Store: ...

    async def __aexit__(self, *exc: object) -> None: ...

    async def migrate(self, schema: Schema) -> None: ...

    async def write(self, fn: Callable[[Conn], T]) -> T: ...

    async def read(self, fn: Callable[[Conn], T]) -> T: ...

    async def execute(self, sql: str, args: Sequence[Any] = ()) -> int: ...

    async def insert(self, sql: str, args: Sequence[Any] = ()) -> int: ...

    async def fetchall(self, sql: str, args: Sequence[Any] = ()) -> list[Row]: ...

    async def fetchone(self, sql: str, args: Sequence[Any] = ()) -> Row | None: ...


class _Startable(Protocol):
    async def start(self) -> None: ...

    async def aclose(self) -> None: ...


_S = TypeVar("_S", bound=_Startable)


class StartClose:
    """A mixin: ``async with x:`` is ``await x.start()``, the block, ``await x.aclose()``."""

    async def __aenter__(self: _S) -> _S:
        await self.start()
        return self

    async def __aexit__(self: _Startable, *exc: object) -> None:
        await self.aclose()


def resolve(fut: asyncio.Future[Any], value: Any) -> None:
    """Give ``fut`` its result unless it is already done (cancelled); on its loop's thread."""
    if not fut.done():
        fut.set_result(value)


def reject(fut: asyncio.Future[Any], exc: BaseException) -> None:
    """Give ``fut`` its exception unless it is already done (cancelled); on its loop's thread."""
    if not fut.done():
        fut.set_exception(exc)


def next_group(writes: queue.Queue[T | None], limit: int) -> tuple[list[T], bool]:
    """A writer thread's next write and those queued behind it (at most ``limit``),
    to share one commit; the flag is True once the queue's end (``None``) was taken."""
    item = writes.get()
    if item is None:
        return [], True
    group = [item]
    while len(group) < limit:
        try:
            more = writes.get_nowait()
        except queue.Empty:
            break
        if more is None:
            return group, True
        group.append(more)
    return group, False
