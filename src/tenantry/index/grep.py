"""``grep`` from the index: trigram prefilter, then the real regex on cached text.

Matching follows ripgrep's defaults: the pattern is matched line by line (a
match never spans lines), lines are split on ``\\n``, files are UTF-8 (other
bytes survive as surrogate escapes), binary files (a NUL byte) are skipped.
Globs (``-g``) use ripgrep's gitignore-style rules, relative to the search root.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from tenantry.core.errors import UsageError
from tenantry.index.crawl import TEXT_INDEXED, decode_blob
from tenantry.index.ignore import GlobFilter
from tenantry.index.query import Scope, decode_cursor, encode_cursor, lookup
from tenantry.index.store import subtree
from tenantry.index.trigram import fts_query, required


@dataclass(frozen=True, slots=True)
class GrepSpec:
    pattern: str
    ignore_case: bool = False
    fixed: bool = False
    word: bool = False
    globs: tuple[str, ...] = ()
    files_only: bool = False  # -l
    count: bool = False  # -c
    before: int = 0  # -B
    after: int = 0  # -A
    max_line_chars: int = 2000

    def compile(self) -> re.Pattern[str]:
        pat = re.escape(self.pattern) if self.fixed else self.pattern
        if self.word:
            pat = rf"\b(?:{pat})\b"
        flags = re.MULTILINE | (re.IGNORECASE if self.ignore_case else 0)
        try:
            return re.compile(pat, flags)
        except re.error as exc:
            raise UsageError(
                f"invalid regular expression {self.pattern!r}: {exc}",
                hint="Python `re` syntax; use fixed=true (-F) for a literal string",
            ) from exc


def candidates(
    conn: sqlite3.Connection, scope: Scope, spec: GrepSpec, after_id: int | None
) -> tuple[Iterator[tuple[int, str, bytes]], bool]:
    """(id, path) of text files that may match, in id order; and whether prefiltered.

    Id order is the trigram index's own order, so a page needs no sort of all
    candidates (ripgrep's order is arbitrary too: it searches in parallel).
    """
    flags = re.IGNORECASE if spec.ignore_case else 0
    pat = re.escape(spec.pattern) if spec.fixed else spec.pattern
    match = fts_query(required(pat, flags))
    cond, args = subtree(scope.rel)
    cond = cond.replace("path", "e.path")
    params: list[Any] = [scope.ws, *args, TEXT_INDEXED]
    extra = ""
    if after_id is not None:
        extra = " AND e.id >= ?"
        params.append(after_id)
    if match is None:
        sql = (
            f"SELECT e.id, e.path, c.z FROM entries e CROSS JOIN content c ON c.id = e.id"
            f" WHERE e.ws = ? AND {cond} AND e.text = ?"
            f"{extra} ORDER BY e.id"
        )
    else:
        sql = (
            # CROSS JOIN keeps the trigram lookup as the outer loop (the planner would
            # otherwise walk every entry and probe the FTS index per row)
            f"SELECT e.id, e.path, c.z FROM grams CROSS JOIN entries e ON e.id = grams.rowid"
            f" CROSS JOIN content c ON c.id = e.id"
            # and ORDER BY grams.rowid is the index's own order: rows stream, no sort of
            # every candidate before the first page is full
            f" WHERE grams MATCH ? AND e.ws = ? AND {cond} AND e.text = ?"
            f"{extra.replace('e.id', 'grams.rowid')} ORDER BY grams.rowid"
        )
        params.insert(0, match)
    return ((int(r[0]), str(r[1]), r[2]) for r in conn.execute(sql, params)), match is not None


def _lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def whole_text_ok(pattern: str) -> bool:
    """Whether matching the whole text finds every line the pattern matches.

    True unless the pattern anchors on the text's ends or looks around (a
    look-around could see the neighbouring line's newline).
    """
    return not any(tok in pattern for tok in ("\\A", "\\Z", "(?=", "(?!", "(?<"))


def _hit_lines(text: str, rx: re.Pattern[str], first_only: bool) -> list[int] | None:
    """Indexes of matching lines found by scanning the whole text once.

    None when a match spans lines (then lines must be checked one by one).
    """
    hits: list[int] = []
    pos = line_no = 0
    end = len(text)
    tail_is_line = bool(text) and not text.endswith("\n")
    for m in rx.finditer(text):
        start = m.start()
        if "\n" in m.group():
            return None
        if start == end and not tail_is_line:
            break  # the empty tail after a final newline is not a line
        if first_only:
            lo = text.rfind("\n", 0, start) + 1
            hi = text.find("\n", start)
            if rx.search(text[lo : hi if hi >= 0 else end]) is None:
                return None
            return [0]
        line_no += text.count("\n", pos, start)
        pos = start
        if hits and hits[-1] == line_no:
            continue
        lo = text.rfind("\n", 0, start) + 1
        hi = text.find("\n", start)
        if rx.search(text[lo : hi if hi >= 0 else len(text)]) is None:
            return None  # cannot happen without look-arounds; be safe
        hits.append(line_no)
    return hits


def file_items(
    path: str, text: str, rx: re.Pattern[str], spec: GrepSpec, whole_ok: bool
) -> list[dict[str, Any]]:
    """The result items of one file (empty when it does not match)."""
    hits = _hit_lines(text, rx, spec.files_only) if whole_ok else None
    lines: list[str] | None = None
    if hits is None:
        lines = _lines(text)
        hits = [i for i, line in enumerate(lines) if rx.search(line) is not None]
    if not hits:
        return []
    if spec.files_only:
        return [{"path": path}]
    if spec.count:
        return [{"path": path, "count": len(hits)}]
    if lines is None:
        lines = _lines(text)
    keep: dict[int, bool] = {}
    for i in hits:
        for j in range(max(0, i - spec.before), min(len(lines), i + spec.after + 1)):
            keep.setdefault(j, False)
        keep[i] = True
    cap = spec.max_line_chars
    out = []
    for j in sorted(keep):
        line = lines[j]
        if cap and len(line) > cap:
            line = line[:cap] + "…"
        out.append({"path": path, "line": j + 1, "text": line, "match": keep[j]})
    return out


def grep(
    conn: sqlite3.Connection,
    scope: Scope,
    spec: GrepSpec,
    *,
    limit: int = 200,
    cursor: str | None = None,
) -> dict[str, Any]:
    rx = spec.compile()
    if scope.rel:
        lookup(conn, scope)  # like rg: a path that does not exist is an error
    whole_ok = whole_text_ok(spec.pattern)
    key = decode_cursor(cursor)
    after_id = int(key[0]) if key else None
    skip = int(key[1]) if key else 0
    globs = GlobFilter(spec.globs)
    rel_skip = len(scope.rel) + 1 if scope.rel else 0
    rows, prefiltered = candidates(conn, scope, spec, after_id)
    items: list[dict[str, Any]] = []
    files = scanned = 0
    nxt = None
    for rid, rel, blob in rows:
        if not globs(rel[rel_skip:] if rel != scope.rel else rel.rsplit("/", 1)[-1]):
            continue
        scanned += 1
        found = file_items(scope.abs(rel), decode_blob(blob), rx, spec, whole_ok)
        if rid == after_id:
            found = found[skip:]
        else:
            skip = 0
        if not found:
            continue
        files += 1
        room = limit - len(items)
        if len(found) > room:
            items += found[:room]
            nxt = encode_cursor([rid, skip + room])
            break
        items += found
        if len(items) >= limit:
            nxt = encode_cursor([rid, skip + len(found)])
            break
    return {
        "items": items,
        "next_cursor": nxt,
        "files": files,
        "scanned": scanned,
        "prefiltered": prefiltered,
    }
