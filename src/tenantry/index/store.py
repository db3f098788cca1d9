"""Writing the index: apply one directory scan to the tables, in one transaction.

Every function here takes a ``sqlite3.Connection`` and runs on the database's
writer thread (``Database.write``). The diff is computed against the rows the
index holds at that moment, so a scan applied twice is harmless.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass

from tenantry.index.crawl import (
    TEXT_INDEXED,
    TEXT_SECRET,
    DirScan,
    Found,
    decode_blob,
    join,
    secret,
)


def subtree(rel: str, *, include_self: bool = True) -> tuple[str, list[str]]:
    """SQL condition (and args) selecting ``rel`` and everything under it."""
    if not rel:
        return ("1" if include_self else "path != ''"), []
    cond = "(path >= ? AND path < ?)"
    args = [rel + "/", rel + "0"]  # '0' is the character after '/'
    if include_self:
        return f"(path = ? OR {cond})", [rel, *args]
    return cond, args


@dataclass(frozen=True, slots=True)
class Child:
    id: int
    name: str
    kind: str
    new: bool


def add_workspace(conn: sqlite3.Connection, root: str, mode: int, mtime_ns: int) -> int:
    cur = conn.execute("INSERT INTO workspaces (root, added_at) VALUES (?, ?)", (root, time.time()))
    ws = int(cur.lastrowid or 0)
    conn.execute(
        "INSERT INTO entries (ws, parent, path, base, kind, size, mtime_ns, mode)"
        " VALUES (?, 0, '', 1, 'd', 0, ?, ?)",
        (ws, mtime_ns, mode),
    )
    return ws


def remove_workspace(conn: sqlite3.Connection, ws: int) -> None:
    _delete_rows(conn, ws, "1", [])
    conn.execute("DELETE FROM workspaces WHERE id = ?", (ws,))


def _delete_rows(conn: sqlite3.Connection, ws: int, cond: str, args: list[str]) -> int:
    rows = conn.execute(
        f"SELECT e.id, c.z FROM entries e JOIN content c ON c.id = e.id"
        f" WHERE e.ws = ? AND {cond.replace('path', 'e.path')}",
        [ws, *args],
    ).fetchall()
    for rid, blob in rows:
        _drop_text(conn, rid, blob)
    cur = conn.execute(f"DELETE FROM entries WHERE ws = ? AND {cond}", [ws, *args])
    return cur.rowcount


def _drop_text(conn: sqlite3.Connection, rid: int, blob: bytes) -> None:
    conn.execute(
        "INSERT INTO grams (grams, rowid, body) VALUES ('delete', ?, ?)",
        (rid, decode_blob(blob)),
    )
    conn.execute("DELETE FROM content WHERE id = ?", (rid,))


def purge_secrets(conn: sqlite3.Connection, ws: int, root: str) -> int:
    """Drop the text of credential files an earlier crawl stored (before the index
    kept them out); returns how many. Run once per workspace as the daemon starts."""
    base = root.rstrip("/")
    rows = [
        (rid, path)
        for rid, path in conn.execute(
            "SELECT id, path FROM entries WHERE ws = ? AND text = ?", (ws, TEXT_INDEXED)
        )
        if secret(f"{base}/{path}")
    ]
    for rid, _ in rows:
        blob = conn.execute("SELECT z FROM content WHERE id = ?", (rid,)).fetchone()
        if blob is not None:
            _drop_text(conn, rid, blob[0])
        conn.execute("UPDATE entries SET text = ? WHERE id = ?", (TEXT_SECRET, rid))
    return len(rows)


def _put_text(conn: sqlite3.Connection, rid: int, found: Found) -> None:
    if found.text_state == TEXT_INDEXED and found.blob is not None:
        conn.execute("INSERT INTO content (id, z) VALUES (?, ?)", (rid, found.blob))
        conn.execute("INSERT INTO grams (rowid, body) VALUES (?, ?)", (rid, found.text))


def apply_scan(conn: sqlite3.Connection, ws: int, dir_id: int, scan: DirScan) -> list[Child] | None:
    """Make the index's children of ``dir_id`` match ``scan``; return its subdirectories.

    None when the directory row is gone (an ancestor was deleted meanwhile) or the
    directory no longer exists on disk (its rows are deleted then).
    """
    row = conn.execute("SELECT path FROM entries WHERE id = ? AND ws = ?", (dir_id, ws)).fetchone()
    if row is None:
        return None
    rel = scan.rel
    if scan.exists and not scan.readable:
        return []  # e.g. permission denied: keep what the index knows
    if not scan.exists:
        cond, args = subtree(rel, include_self=bool(rel))
        _delete_rows(conn, ws, cond, args)
        return None
    conn.execute(
        "UPDATE entries SET size = ?, mtime_ns = ?, mode = ? WHERE id = ?",
        (scan.size, scan.mtime_ns, scan.mode, dir_id),
    )
    current = {
        r[1]: r
        for r in conn.execute(
            "SELECT id, substr(path, base), kind, size, mtime_ns, mode, text"
            " FROM entries WHERE parent = ?",
            (dir_id,),
        )
    }
    seen = {f.name for f in scan.found}
    for name, r in current.items():
        if name not in seen:
            _delete_child(conn, ws, join(rel, name), r[0], r[2])
    out: list[Child] = []
    base = len(rel) + 2 if rel else 1
    for f in scan.found:
        old = current.get(f.name)
        child_rel = join(rel, f.name)
        if old is not None and old[2] != f.kind:
            _delete_child(conn, ws, child_rel, old[0], old[2])
            old = None
        if old is None:
            state = max(f.text_state, 0)
            cur = conn.execute(
                "INSERT INTO entries (ws, parent, path, base, kind, size, mtime_ns, mode, text)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (ws, dir_id, child_rel, base, f.kind, f.size, f.mtime_ns, f.mode, state),
            )
            rid = int(cur.lastrowid or 0)
            _put_text(conn, rid, f)
            if f.kind == "d":
                out.append(Child(rid, f.name, f.kind, True))
            continue
        rid = old[0]
        if f.kind == "d":
            out.append(Child(rid, f.name, f.kind, False))
            continue  # a directory's own stat is written when it is scanned
        _update_file(conn, rid, (old[3], old[4], old[5], old[6]), f)
    return out


def apply_file(conn: sqlite3.Connection, ws: int, rid: int, found: Found) -> bool:
    """Update one file's row from a scan of that file alone; False if the row is gone."""
    row = conn.execute(
        "SELECT kind, size, mtime_ns, mode, text FROM entries WHERE id = ? AND ws = ?", (rid, ws)
    ).fetchone()
    if row is None or row[0] != "f":
        return False
    _update_file(conn, rid, (row[1], row[2], row[3], row[4]), found)
    return True


def _update_file(
    conn: sqlite3.Connection, rid: int, old: tuple[int, int, int, int], f: Found
) -> None:
    """Write a file's new stat (old: size, mtime, mode, text state) and text, if read."""
    state = old[3] if f.text_state < 0 else f.text_state
    if old != (f.size, f.mtime_ns, f.mode, state):
        conn.execute(
            "UPDATE entries SET size = ?, mtime_ns = ?, mode = ?, text = ? WHERE id = ?",
            (f.size, f.mtime_ns, f.mode, state, rid),
        )
    if f.text_state >= 0:
        if old[3] == TEXT_INDEXED:
            blob = conn.execute("SELECT z FROM content WHERE id = ?", (rid,)).fetchone()
            if blob is not None:
                _drop_text(conn, rid, blob[0])
        _put_text(conn, rid, f)


def _delete_child(conn: sqlite3.Connection, ws: int, rel: str, rid: int, kind: str) -> None:
    if kind == "d":
        cond, args = subtree(rel)
        _delete_rows(conn, ws, cond, args)
        return
    blob = conn.execute("SELECT z FROM content WHERE id = ?", (rid,)).fetchone()
    if blob is not None:
        _drop_text(conn, rid, blob[0])
    conn.execute("DELETE FROM entries WHERE id = ?", (rid,))
