"""The lesson store: the memory's tables in the daemon's store (or a file of its own).

Content rows are inserted once and never rewritten; lifecycle changes
(status, trust, verification, supersession) update the row's lifecycle
columns and append one ``lesson_history`` row in the same transaction, so the
full history of every lesson is kept. The FTS5 index holds processed text
(see ``terms``); a per-term document-frequency table is mirrored in memory so
retrieval can drop near-ubiquitous query terms without touching the disk.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tenantry.core.errors import NotFound
from tenantry.memory import terms
from tenantry.memory.models import Kind, Lesson, Scope, Source, Status, Trust
from tenantry.memory.scored import ScoredPostings
from tenantry.store.engine import Conn, Row, Schema, StartClose, Store
from tenantry.store.sqlite import SQLiteStore

_COLUMNS = (
    "id, kind, scope, owner_user, owner_key, owner_project, owner_agent, title, body, subject,"
    " error_signature, sig_hash, evidence, sources, claim, trust, trust_rank, status,"
    " quarantined, findings, supersedes, superseded_by, proposed_scope, ttl_days,"
    " verified_at, created_at, updated_at, classes, sensitive"
)


LESSONS_DECODED = 4096  # lessons kept decoded for recalls (all dropped when full)

# the terms of the index on PostgreSQL, counted as retrieval_pg counts a lesson's length
_PG_TOKENS = (
    "SELECT coalesce(sum(array_length(regexp_split_to_array(btrim(title || ' ' || body"
    " || ' ' || subjects || ' ' || signature), '\\s+'), 1)), 0) FROM lessons_fts"
)

# the FTS5 tables are plain tables on PostgreSQL (see migrations/postgresql/)
SCHEMA = Schema("memory", __package__ or "tenantry.memory", legacy_file="memory.sqlite3")


def new_id() -> str:
    return "L" + secrets.token_hex(5)


_KINDS = {k.value: k for k in Kind}
_SCOPES = {k.value: k for k in Scope}
_SOURCES = {k.value: k for k in Source}
_TRUSTS = {k.value: k for k in Trust}
_STATUSES = {k.value: k for k in Status}


def _json(text: str) -> Any:
    """``json.loads``, with the empty list and object (most rows' values) decoded directly."""
    if text == "[]":
        return []
    if text == "{}":
        return {}
    return json.loads(text)


def row_to_lesson(row: Row) -> Lesson:
    """A lesson from its row (a recall decodes dozens, so the common cases are direct)."""
    claim = row["claim"]
    return Lesson(
        id=row["id"],
        kind=_KINDS.get(row["kind"]) or Kind(row["kind"]),
        scope=_SCOPES.get(row["scope"]) or Scope(row["scope"]),
        title=row["title"],
        body=row["body"],
        owner_user=row["owner_user"],
        owner_key=row["owner_key"],
        owner_project=row["owner_project"],
        owner_agent=row["owner_agent"],
        subject=_json(row["subject"]),
        error_signature=row["error_signature"],
        sig_hash=row["sig_hash"],
        evidence=_json(row["evidence"]),
        sources=[_SOURCES.get(s) or Source(s) for s in _json(row["sources"])],
        claim=json.loads(claim) if claim else None,
        trust=_TRUSTS.get(row["trust"]) or Trust(row["trust"]),
        status=_STATUSES.get(row["status"]) or Status(row["status"]),
        quarantined=bool(row["quarantined"]),
        findings=_json(row["findings"]),
        supersedes=row["supersedes"],
        superseded_by=row["superseded_by"],
        proposed_scope=row["proposed_scope"],
        ttl_days=float(row["ttl_days"]),
        verified_at=row["verified_at"],
        created_at=float(row["created_at"]),
        updated_at=float(row["updated_at"]),
        classes=[c for c in row["classes"].split(",") if c] if row["classes"] else [],
    )


def _values(les: Lesson) -> tuple[Any, ...]:
    return (
        les.id,
        les.kind.value,
        les.scope.value,
        les.owner_user,
        les.owner_key,
        les.owner_project,
        les.owner_agent,
        les.title,
        les.body,
        json.dumps(les.subject, sort_keys=True),
        les.error_signature,
        les.sig_hash,
        json.dumps(les.evidence),
        json.dumps([s.value for s in les.sources]),
        json.dumps(les.claim) if les.claim is not None else None,
        les.trust.value,
        les.trust.rank,
        les.status.value,
        int(les.quarantined),
        json.dumps(les.findings),
        les.supersedes,
        les.superseded_by,
        les.proposed_scope,
        les.ttl_days,
        les.verified_at,
        les.created_at,
        les.updated_at,
        ",".join(les.classes),
        int(les.sensitive),
    )


def fts_fields(les: Lesson) -> tuple[str, str, str, str]:
    subjects = " ".join(f"{k} {v}" for k, v in les.subject.items())
    return (
        terms.index_text(les.title),
        terms.index_text(les.body),
        terms.index_text(subjects),
        terms.index_text(les.error_signature),
    )


def _insert(conn: Conn, les: Lesson, actor: str) -> list[str]:
    marks = ", ".join("?" * len(_COLUMNS.split(",")))
    cur = conn.execute(
        f"INSERT INTO lessons ({_COLUMNS}) VALUES ({marks}) RETURNING seq", _values(les)
    )
    seq = int(cur.fetchone()[0])
    fields = fts_fields(les)
    conn.execute(
        "INSERT INTO lessons_fts (rowid, title, body, subjects, signature) VALUES (?, ?, ?, ?, ?)",
        (seq, *fields),
    )
    conn.executemany(
        "INSERT INTO lesson_subjects (lesson_id, key, value) VALUES (?, ?, ?)",
        [(les.id, k, v.lower()) for k, v in les.subject.items()],
    )
    if _tiered(les):
        conn.execute(
            "INSERT INTO trusted_fts (rowid, title, body, subjects, signature)"
            " VALUES (?, ?, ?, ?, ?)",
            (seq, *fields),
        )
    _log(conn, les.id, actor, "created", {"trust": les.trust.value, "status": les.status.value})
    return " ".join(fields).split()


def _tiered(les: Lesson) -> bool:
    """Belongs to the trusted tier (see migration 0003)."""
    return les.trust.rank >= Trust.PROBE_VERIFIED.rank and les.status.live and not les.quarantined


def _retier(conn: Conn, lesson_id: str) -> Lesson:
    """Put a lesson in or out of the trusted tier after a lifecycle change."""
    row = conn.execute(f"SELECT seq, {_COLUMNS} FROM lessons WHERE id = ?", (lesson_id,)).fetchone()
    les = row_to_lesson(row)
    conn.execute("DELETE FROM trusted_fts WHERE rowid = ?", (row["seq"],))
    if _tiered(les):
        conn.execute(
            "INSERT INTO trusted_fts (rowid, title, body, subjects, signature)"
            " VALUES (?, ?, ?, ?, ?)",
            (row["seq"], *fts_fields(les)),
        )
    return les


def _log(conn: Conn, lesson_id: str, actor: str, action: str, detail: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO lesson_history (lesson_id, ts, actor, action, detail) VALUES (?, ?, ?, ?, ?)",
        (lesson_id, time.time(), actor, action, json.dumps(detail, default=str)),
    )


class LessonStore(StartClose):
    """Lessons in the daemon's store, or alone in a file: ``async with LessonStore(path)``."""

    def __init__(self, store: str | Path | Store) -> None:
        self._owned = isinstance(store, str | Path)
        self.db: Store = SQLiteStore(store) if isinstance(store, str | Path) else store
        self.df: dict[str, int] = {}
        self.n_docs = 0
        self.n_tokens = 0  # terms in the index, all lessons and columns (BM25's average length)
        # term -> (n_docs when computed, highest seq then, {seq: score}): see retrieval.top_postings
        self.top_postings: dict[str, tuple[int, int, dict[int, float]]] = {}
        # lesson id -> its indexed terms for BM25 (see retrieval._with_candidates, bm25.doc)
        self.doc_terms: dict[str, tuple[int, dict[str, float]]] = {}
        self.generation = 0  # bumped by every write (what the caches of recalls key on)
        self.scored = ScoredPostings()  # each term's postings with its BM25 there (``scored``)
        self._decoded: tuple[int, dict[int, Lesson]] = (0, {})

    async def start(self) -> None:
        if self._owned:
            await self.db.start()
        await self.db.migrate(SCHEMA)

        sqlite = self.db.engine == "sqlite"

        def load(conn: Conn) -> tuple[dict[str, int], int, int]:
            df: dict[str, int] = {}
            tokens = 0
            if sqlite:  # fts5vocab also counts each term's instances: the index's length
                for r in conn.execute("SELECT term, doc, cnt FROM lessons_vocab"):
                    df[r[0]] = int(r[1])
                    tokens += int(r[2])
            else:
                df = {r[0]: int(r[1]) for r in conn.execute("SELECT term, doc FROM lessons_vocab")}
                tokens = int(conn.execute(_PG_TOKENS).fetchone()[0])
            n = conn.execute("SELECT count(*) FROM lessons").fetchone()[0]
            return df, int(n), tokens

        self.df, self.n_docs, self.n_tokens = await self.db.read(load)

    async def aclose(self) -> None:
        if self._owned:
            await self.db.aclose()

    def decoded(self) -> dict[int, Lesson]:
        """Lessons recalls decoded, by store seq, until the next write through this store.

        A recall ranks dozens of lessons, most of them the same from one recall to
        the next (the lessons of common errors), so their rows are decoded once.
        Only ``retrieval`` reads it, and it hands out copies (the lessons are mutable).
        """
        generation, memo = self._decoded
        if generation != self.generation or len(memo) >= LESSONS_DECODED:
            memo = {}
            self._decoded = (self.generation, memo)
        return memo

    def _count(self, words: Sequence[str]) -> None:
        self.generation += 1
        for w in set(words):
            self.df[w] = self.df.get(w, 0) + 1
        self.n_docs += 1
        self.n_tokens += len(words)

    # -- writes ------------------------------------------------------------------
    async def add(self, les: Lesson, actor: str) -> Lesson:
        words = await self.db.write(lambda c: _insert(c, les, actor))
        self._count(words)
        return les

    async def add_many(self, lessons: Sequence[Lesson], actor: str) -> int:
        """Bulk insert in one transaction (imports, benchmarks)."""

        def fn(conn: Conn) -> list[list[str]]:
            return [_insert(conn, les, actor) for les in lessons]

        for words in await self.db.write(fn):
            self._count(words)
        return len(lessons)

    async def supersede(self, old_id: str, new: Lesson, actor: str) -> Lesson:
        """Insert ``new`` and mark ``old_id`` superseded by it, atomically."""

        def fn(conn: Conn) -> list[str]:
            row = conn.execute("SELECT status FROM lessons WHERE id = ?", (old_id,)).fetchone()
            if row is None:
                raise NotFound(f"no lesson {old_id}")
            words = _insert(conn, new, actor)
            conn.execute(
                "UPDATE lessons SET status = ?, superseded_by = ?, updated_at = ? WHERE id = ?",
                (Status.SUPERSEDED.value, new.id, time.time(), old_id),
            )
            _log(conn, old_id, actor, "superseded", {"by": new.id, "was": row["status"]})
            _retier(conn, old_id)
            return words

        self.generation += 1  # the old lesson's row changes (see ``decoded``)
        self._count(await self.db.write(fn))
        return new

    async def transition(
        self,
        lesson_id: str,
        actor: str,
        action: str,
        detail: dict[str, Any] | None = None,
        **changes: Any,
    ) -> Lesson:
        """Change lifecycle columns (status, trust, verified_at, quarantined) and log it."""
        allowed = {"status", "trust", "verified_at", "quarantined", "proposed_scope"}
        if set(changes) - allowed:
            raise ValueError(f"not a lifecycle column: {set(changes) - allowed}")

        def fn(conn: Conn) -> Lesson:
            sets: list[str] = ["updated_at = ?"]
            args: list[Any] = [time.time()]
            for k, v in changes.items():
                if k == "trust":
                    sets += ["trust = ?", "trust_rank = ?"]
                    args += [Trust(v).value, Trust(v).rank]
                else:
                    sets.append(f"{k} = ?")
                    args.append(v.value if isinstance(v, Status) else v)
            cur = conn.execute(
                f"UPDATE lessons SET {', '.join(sets)} WHERE id = ?", (*args, lesson_id)
            )
            if cur.rowcount == 0:
                raise NotFound(f"no lesson {lesson_id}")
            shown = {k: (v.value if hasattr(v, "value") else v) for k, v in changes.items()}
            _log(conn, lesson_id, actor, action, {**shown, **(detail or {})})
            return _retier(conn, lesson_id)

        self.generation += 1  # a recall from now on decodes the row again
        try:
            return await self.db.write(fn)
        finally:
            self.generation += 1  # and one that started during the write too

    async def endorse(self, lesson_id: str, principal_key: str, user: str, project: str) -> int:
        """Record agreement; returns the number of distinct projects endorsing."""

        def fn(conn: Conn) -> int:
            conn.execute(
                "INSERT INTO endorsements VALUES (?, ?, ?, ?, ?)"
                " ON CONFLICT (lesson_id, principal_key) DO NOTHING",
                (lesson_id, principal_key, user, project, time.time()),
            )
            _log(conn, lesson_id, principal_key, "endorsed", {"project": project})
            row = conn.execute(
                "SELECT count(DISTINCT project) FROM endorsements"
                " WHERE lesson_id = ? AND project <> ''",
                (lesson_id,),
            ).fetchone()
            return int(row[0])

        return await self.db.write(fn)

    # -- reads -------------------------------------------------------------------
    async def texts_since(self, seq: int, limit: int) -> list[tuple[int, str, str, str, str]]:
        """(seq, id, title, error signature, body) of the lessons stored after ``seq``."""
        rows = await self.db.fetchall(
            "SELECT seq, id, title, error_signature, body FROM lessons"
            " WHERE seq > ? ORDER BY seq LIMIT ?",
            (seq, limit),
        )
        return [(int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4])) for r in rows]

    async def get(self, lesson_id: str) -> Lesson | None:
        row = await self.db.fetchone(f"SELECT {_COLUMNS} FROM lessons WHERE id = ?", (lesson_id,))
        return row_to_lesson(row) if row else None

    async def require(self, lesson_id: str) -> Lesson:
        les = await self.get(lesson_id)
        if les is None:
            raise NotFound(
                f"no lesson {lesson_id}", hint="list lessons with `tenantry memory list`"
            )
        return les

    async def history(self, lesson_id: str) -> list[dict[str, Any]]:
        rows = await self.db.fetchall(
            "SELECT ts, actor, action, detail FROM lesson_history WHERE lesson_id = ? ORDER BY seq",
            (lesson_id,),
        )
        return [
            {
                "ts": r["ts"],
                "actor": r["actor"],
                "action": r["action"],
                "detail": json.loads(r["detail"]),
            }
            for r in rows
        ]

    async def query(
        self,
        where: str = "1 = 1",
        args: Sequence[Any] = (),
        limit: int = 100,
        order: str = "seq DESC",
    ) -> list[Lesson]:
        rows = await self.db.fetchall(
            f"SELECT {_COLUMNS} FROM lessons WHERE {where} ORDER BY {order} LIMIT ?",
            (*args, limit),
        )
        return [row_to_lesson(r) for r in rows]

    async def find_same(
        self, owner_user: str, kind: Kind, sig_hash: str, title: str
    ) -> Lesson | None:
        """A live lesson of this user with the same kind, signature and title (dedup)."""
        found = await self.query(
            "owner_user = ? AND kind = ? AND sig_hash = ? AND title = ?"
            " AND status IN ('candidate', 'active', 'stale')",
            (owner_user, kind.value, sig_hash, title),
            limit=1,
        )
        return found[0] if found else None

    async def similar_elsewhere(self, les: Lesson) -> list[Lesson]:
        """Live lessons of *other* users with the same kind and signature (agreement)."""
        if not les.sig_hash:
            return []
        return await self.query(
            "sig_hash = ? AND kind = ? AND owner_user <> ? AND quarantined = 0"
            " AND status IN ('candidate', 'active', 'stale')",
            (les.sig_hash, les.kind.value, les.owner_user),
            limit=20,
        )

    async def endorsers(self, lesson_id: str) -> tuple[int, int]:
        """Distinct users and distinct (non-empty) projects endorsing a lesson."""
        row = await self.db.fetchone(
            "SELECT count(DISTINCT \"user\"), count(DISTINCT nullif(project, ''))"
            " FROM endorsements WHERE lesson_id = ?",
            (lesson_id,),
        )
        return (int(row[0]), int(row[1])) if row else (0, 0)

    async def endorsement_projects(self, lesson_id: str) -> list[str]:
        rows = await self.db.fetchall(
            "SELECT DISTINCT project FROM endorsements WHERE lesson_id = ? AND project <> ''",
            (lesson_id,),
        )
        return [r[0] for r in rows]

    async def due(self, now: float, limit: int = 200) -> list[Lesson]:
        """Live lessons whose TTL lapsed since their last verification (or creation)."""
        return await self.query(
            "status IN ('active', 'candidate') AND quarantined = 0"
            " AND coalesce(verified_at, created_at) + ttl_days * 86400.0 < ?",
            (now,),
            limit=limit,
            order="coalesce(verified_at, created_at)",
        )
