"""Import a concept's old file into the daemon's one SQLite database, once.

Before concepts shared one database each kept its own file in the state
directory (``kill.sqlite3``, ``budgets.sqlite3``, ``memory.sqlite3``,
``leases.sqlite3``). When a concept first migrates in the shared database and
its old file is there, the store applies the migrations the old file had, copies
every row (ordinary tables column by column, FTS5 tables with their rowids;
derived tables such as ``fts5vocab`` are rebuilt by SQLite), applies the newer
migrations, and renames the old file to ``<name>.imported`` so it is read once
and kept as a backup.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path

from tenantry.store.engine import Schema

log = logging.getLogger(__name__)

IMPORTED_SUFFIX = ".imported"


def legacy_path(db_path: str, schema: Schema) -> Path | None:
    """The concept's old file next to ``db_path``, if there is one to import."""
    if not schema.legacy_file:
        return None
    old = Path(db_path).parent / schema.legacy_file
    if not old.is_file() or old.resolve() == Path(db_path).resolve():
        return None
    return old


def version_of(old: Path) -> int:
    """The newest migration the old file records (0 when it has none)."""
    conn = sqlite3.connect(f"file:{old}?mode=ro", uri=True)
    try:
        row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0)
    except sqlite3.Error:
        return 0
    finally:
        conn.close()


def _columns(conn: sqlite3.Connection, db: str, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f'PRAGMA {db}.table_info("{table}")')]


def _tables(conn: sqlite3.Connection, db: str) -> dict[str, str]:
    rows = conn.execute(
        f"SELECT name, coalesce(sql, '') FROM {db}.sqlite_master WHERE type='table'"
    )
    return {str(r[0]): str(r[1]) for r in rows}


def import_file(conn: sqlite3.Connection, old: Path, schema: Schema) -> int:
    """Copy the rows of ``old`` into ``conn``'s database; returns the rows copied."""
    conn.execute("ATTACH DATABASE ? AS legacy", (str(old),))
    copied = 0
    try:
        theirs = _tables(conn, "legacy")
        ours = _tables(conn, "main")
        virtual = [n for n, sql in theirs.items() if sql.upper().startswith("CREATE VIRTUAL")]
        conn.execute("BEGIN IMMEDIATE")
        try:
            for name, sql in theirs.items():
                if name.startswith("sqlite_") or name == "schema_migrations":
                    continue
                if any(name.startswith(v + "_") for v in virtual):
                    continue  # an FTS5 shadow table: filled by the insert into its table
                target = schema.renames.get(name, name)
                if target not in ours:
                    continue
                if name in virtual:
                    if "fts5vocab" in sql or "content = ''" in sql or "content=''" in sql:
                        continue  # derived or contentless: nothing to read back
                    cols = ["rowid", *_columns(conn, "legacy", name)]
                else:
                    mine = set(_columns(conn, "main", target))
                    cols = [c for c in _columns(conn, "legacy", name) if c in mine]
                names = ", ".join(f'"{c}"' for c in cols)
                cur = conn.execute(
                    f'INSERT OR IGNORE INTO main."{target}" ({names})'
                    f' SELECT {names} FROM legacy."{name}"'
                )
                copied += max(cur.rowcount, 0)
            conn.execute("COMMIT")
        except sqlite3.Error:
            conn.execute("ROLLBACK")
            raise
    finally:
        conn.execute("DETACH DATABASE legacy")
    for suffix in ("", "-wal", "-shm"):
        src = Path(f"{old}{suffix}")
        if src.exists():
            with contextlib.suppress(OSError):
                os.replace(src, f"{old}{IMPORTED_SUFFIX}{suffix}")
    log.info("imported %d rows of %s from %s", copied, schema.concept, old)
    return copied
