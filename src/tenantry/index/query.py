"""Answering find, ls, stat, du, tree and recent from the index alone.

Every function takes a read connection and a ``Scope`` and touches no file.
Paths in results are absolute (workspace root + relative path). Listings are
capped at ``limit`` and paginated with an opaque ``cursor`` (the sort key of
the last item returned).
"""

from __future__ import annotations

import base64
import json
import sqlite3
from dataclasses import dataclass
from typing import Any

from tenantry.core.errors import NotFound, UsageError
from tenantry.index.store import subtree

DEPTH = "(length(path) - length(replace(path, '/', '')) + (path != ''))"
COLUMNS = "path, kind, size, mtime_ns, mode"
SORTS = ("path", "modified", "-modified")


@dataclass(frozen=True, slots=True)
class Scope:
    """Where a query looks: a workspace and a path relative to its root."""

    ws: int
    root: str
    rel: str

    def abs(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    @property
    def depth(self) -> int:
        return self.rel.count("/") + 1 if self.rel else 0


@dataclass(frozen=True, slots=True)
class FindFilter:
    name: str | None = None
    iname: str | None = None
    path: str | None = None  # glob over the whole absolute path, like find -path
    kind: str | None = None
    min_size: int | None = None
    max_size: int | None = None
    mtime_after: float | None = None
    mtime_before: float | None = None
    min_depth: int = 0
    max_depth: int | None = None


def encode_cursor(key: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(key).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> list[Any] | None:
    if not cursor:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (ValueError, json.JSONDecodeError) as exc:
        raise UsageError("invalid cursor", hint="pass next_cursor from a previous page") from exc
    if not isinstance(key, list):
        raise UsageError("invalid cursor", hint="pass next_cursor from a previous page")
    return key


def sqlite_glob(pattern: str) -> str:
    """Translate an fnmatch/find glob to SQLite GLOB (``[!x]`` -> ``[^x]``, ``\\c`` -> ``[c]``)."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            out.append(f"[{pattern[i + 1]}]")
            i += 2
            continue
        if ch == "[" and pattern[i + 1 : i + 2] == "!":
            out.append("[^")
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def literal_prefix(glob: str) -> str:
    """The characters every match of ``glob`` starts with."""
    out = []
    for ch in glob:
        if ch in "*?[\\":
            break
        out.append(ch)
    return "".join(out)


def item(scope: Scope, row: sqlite3.Row | tuple[Any, ...]) -> dict[str, Any]:
    return {
        "path": scope.abs(row[0]),
        "type": row[1],
        "size": row[2],
        "mtime": row[3] / 1e9,
    }


def _where(scope: Scope, flt: FindFilter) -> tuple[list[str], list[Any]]:
    cond, args = subtree(scope.rel)
    where = ["ws = ?", cond]
    params: list[Any] = [scope.ws, *args]
    if flt.kind:
        where.append("kind = ?")
        params.append(flt.kind)
    if flt.name:
        where.append("substr(path, base) GLOB ?")
        params.append(sqlite_glob(flt.name))
        prefix = literal_prefix(flt.name)
        if prefix:  # lets the name index narrow the scan
            where.append("substr(path, base) >= ? AND substr(path, base) < ?")
            params += [prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)]
    if flt.iname:
        where.append("lower(substr(path, base)) GLOB ?")
        params.append(sqlite_glob(flt.iname.lower()))
    if flt.path:
        where.append("(? || CASE WHEN path = '' THEN '' ELSE '/' || path END) GLOB ?")
        params += [scope.root, sqlite_glob(flt.path)]
    if flt.min_size is not None:
        where.append("size >= ?")
        params.append(flt.min_size)
    if flt.max_size is not None:
        where.append("size <= ?")
        params.append(flt.max_size)
    if flt.mtime_after is not None:
        where.append("mtime_ns > ?")
        params.append(int(flt.mtime_after * 1e9))
    if flt.mtime_before is not None:
        where.append("mtime_ns < ?")
        params.append(int(flt.mtime_before * 1e9))
    if flt.min_depth > 0:
        where.append(f"{DEPTH} >= ?")
        params.append(scope.depth + flt.min_depth)
    if flt.max_depth is not None:
        where.append(f"{DEPTH} <= ?")
        params.append(scope.depth + flt.max_depth)
    return where, params


def find(
    conn: sqlite3.Connection,
    scope: Scope,
    flt: FindFilter,
    *,
    sort: str = "path",
    limit: int = 200,
    cursor: str | None = None,
) -> dict[str, Any]:
    if sort not in SORTS:
        raise UsageError(f"unknown sort {sort!r}", hint=f"use one of {', '.join(SORTS)}")
    if scope.rel:
        lookup(conn, scope)  # like find: a start point that does not exist is an error
    where, params = _where(scope, flt)
    key = decode_cursor(cursor)
    if sort == "path":
        order = "path"
        if key:
            where.append("path > ?")
            params.append(str(key[0]))
    else:
        op, direction = (">", "") if sort == "modified" else ("<", " DESC")
        order = f"mtime_ns{direction}, path"
        if key:
            where.append(f"(mtime_ns {op} ? OR (mtime_ns = ? AND path > ?))")
            params += [int(key[0]), int(key[0]), str(key[1])]
    sql = f"SELECT {COLUMNS} FROM entries WHERE {' AND '.join(where)} ORDER BY {order} LIMIT ?"
    rows = conn.execute(sql, [*params, limit + 1]).fetchall()
    more = len(rows) > limit
    rows = rows[:limit]
    nxt = None
    if more:
        last = rows[-1]
        nxt = encode_cursor([last[0]] if sort == "path" else [last[3], last[0]])
    return {"items": [item(scope, r) for r in rows], "next_cursor": nxt}


def lookup(conn: sqlite3.Connection, scope: Scope) -> sqlite3.Row:
    row = conn.execute(
        f"SELECT id, {COLUMNS}, text FROM entries WHERE ws = ? AND path = ?",
        (scope.ws, scope.rel),
    ).fetchone()
    if row is None:
        raise NotFound(
            f"{scope.abs(scope.rel)} is not in the index",
            hint="it does not exist, is ignored (.gitignore), or changed since the last refresh;"
            " retry with verify=true",
        )
    return row  # type: ignore[no-any-return]


TEXT_STATES = {0: "", 1: "indexed", 2: "binary", 3: "too-large", 4: "unreadable"}


def stat(conn: sqlite3.Connection, scope: Scope) -> dict[str, Any]:
    row = lookup(conn, scope)
    out = item(scope, row[1:])
    out["mode"] = f"{row['mode'] & 0o7777:04o}"
    out["content"] = TEXT_STATES.get(row["text"], "")
    if row["kind"] == "d":
        out["entries"] = conn.execute(
            "SELECT count(*) FROM entries WHERE parent = ?", (row["id"],)
        ).fetchone()[0]
    return out


def ls(
    conn: sqlite3.Connection, scope: Scope, *, limit: int = 200, cursor: str | None = None
) -> dict[str, Any]:
    row = lookup(conn, scope)
    if row["kind"] != "d":
        return {"items": [item(scope, row[1:])], "next_cursor": None}
    key = decode_cursor(cursor)
    sql = f"SELECT {COLUMNS} FROM entries WHERE parent = ?"
    params: list[Any] = [row["id"]]
    if key:
        sql += " AND path > ?"
        params.append(str(key[0]))
    rows = conn.execute(sql + " ORDER BY path LIMIT ?", [*params, limit + 1]).fetchall()
    nxt = encode_cursor([rows[limit - 1][0]]) if len(rows) > limit else None
    return {"items": [item(scope, r) for r in rows[:limit]], "next_cursor": nxt}


def du(conn: sqlite3.Connection, scope: Scope, *, limit: int = 50) -> dict[str, Any]:
    """Apparent sizes (bytes) of the scope and of each of its children, largest first."""
    row = lookup(conn, scope)
    if row["kind"] != "d":
        size = row["size"]
        path = scope.abs(scope.rel)
        return {
            "path": path,
            "bytes": size,
            "files": int(row["kind"] == "f"),
            "dirs": 0,
            "children": [],
        }
    children = []
    for rel, kind, size in conn.execute(
        "SELECT path, kind, size FROM entries WHERE parent = ?", (row["id"],)
    ):
        if kind == "d":  # one range scan of the child's subtree on the path index
            cond, args = subtree(rel, include_self=False)
            nbytes, files, dirs = conn.execute(
                "SELECT coalesce(sum(CASE WHEN kind = 'd' THEN 0 ELSE size END), 0),"
                f" coalesce(sum(kind = 'f'), 0), coalesce(sum(kind = 'd'), 0)"
                f" FROM entries WHERE ws = ? AND {cond}",
                [scope.ws, *args],
            ).fetchone()
            dirs += 1
        else:
            nbytes, files, dirs = size, int(kind == "f"), 0
        children.append((nbytes, rel, files, dirs))
    children.sort(key=lambda c: (-c[0], c[1]))
    return {
        "path": scope.abs(scope.rel),
        "bytes": sum(c[0] for c in children),
        "files": sum(c[2] for c in children),
        "dirs": sum(c[3] for c in children),
        "children": [
            {"path": scope.abs(c[1]), "bytes": c[0], "files": c[2]} for c in children[:limit]
        ],
    }


def tree(
    conn: sqlite3.Connection, scope: Scope, *, max_depth: int = 3, limit: int = 500
) -> dict[str, Any]:
    """The scope's entries down to ``max_depth``, level by level (shallowest first when capped).

    Walks the ``parent`` index one level at a time, so the cost follows the
    answer, not the size of the subtree.
    """
    row = lookup(conn, scope)
    skip = len(scope.rel) + 1 if scope.rel else 0
    items: list[dict[str, Any]] = []
    frontier = [int(row["id"])] if row["kind"] == "d" else []
    truncated = False
    depth = 0
    while frontier and depth < max_depth and not truncated:
        depth += 1
        nxt: list[int] = []
        for i in range(0, len(frontier), 500):
            chunk = frontier[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for r in conn.execute(
                f"SELECT id, path, kind, size FROM entries WHERE parent IN ({marks}) ORDER BY path",
                chunk,
            ):
                if len(items) >= limit:
                    truncated = True
                    break
                items.append({"path": r[1][skip:], "type": r[2], "size": r[3], "depth": depth})
                if r[2] == "d":
                    nxt.append(int(r[0]))
            if truncated:
                break
        frontier = nxt
    items.sort(key=lambda x: x["path"].split("/"))
    return {"root": scope.abs(scope.rel), "items": items, "truncated": truncated}
