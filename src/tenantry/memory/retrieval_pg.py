"""Retrieval on PostgreSQL: the same ranking as ``retrieval``, without FTS5.

PostgreSQL keeps ``lessons_fts`` and ``trusted_fts`` as plain tables of the
same processed text (``terms.index_text``), with a GIN index on its
``to_tsvector('simple', ...)``. A query asks that index for the candidates
holding any query term (``plainto_tsquery`` per term, OR-ed: the same parser
on both sides, so it finds a superset), then scores them in Python with the
BM25 that FTS5's ``bm25()`` computes (``tenantry.memory.bm25``) over the exact
whitespace tokens. ``retrieval.search`` calls ``bm25`` where SQLite asks FTS5;
everything else -- fusion, signature and subject matches, boosts, visibility,
dense re-ranking -- is the same code on both engines.

The candidate set is bounded by ``retrieval.choose_words`` (the postings
budget), so fetching every candidate's text stays cheap; document
frequencies and the average length come from the table itself, per query.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from tenantry.memory import retrieval
from tenantry.memory.bm25 import scores as bm25_of
from tenantry.memory.models import Lesson
from tenantry.memory.retrieval import Dense
from tenantry.memory.store import row_to_lesson
from tenantry.store.engine import Conn

_TEXT = "f.title || ' ' || f.body || ' ' || f.subjects || ' ' || f.signature"
_TSV = f"to_tsvector('simple', {_TEXT})"  # the GIN index's expression


def bm25_scores(
    docs: Mapping[int, Sequence[str]], words: Sequence[str], n_docs: int, avgdl: float
) -> dict[int, float]:
    """FTS5's BM25 of each document (its columns' processed text) for ``words``.

    ``docs`` must hold every document of the table that has any of the words
    (their document frequencies are counted here); scores are positive, higher
    is better, and a document with none of the words is left out.
    """
    wanted = set(words)
    df: Counter[str] = Counter()
    for fields in docs.values():
        df.update(wanted.intersection(" ".join(fields).split()))
    return bm25_of(docs, words, df.__getitem__, n_docs, avgdl)


def bm25(
    conn: Conn,
    words: list[str],
    cond: str,
    args: list[Any],
    table: str = "lessons_fts",
    dense: Dense | None = None,
) -> list[tuple[Lesson, float]]:
    """BM25 candidates of ``table`` the viewer may see, best first (at most ``POOL``)."""
    if not words:
        return []
    stats = conn.execute(
        f"SELECT count(*), coalesce(avg(array_length(regexp_split_to_array("
        f"btrim({_TEXT}), '\\s+'), 1)), 0) FROM {table} f"
    ).fetchone()
    n_docs, avgdl = int(stats[0]), float(stats[1])
    query = " || ".join("plainto_tsquery('simple', ?)" for _ in words)
    rows = conn.execute(
        f"SELECT f.rowid, f.title, f.body, f.subjects, f.signature, ({cond}) AS visible"
        f" FROM {table} f JOIN lessons l ON l.seq = f.rowid WHERE {_TSV} @@ ({query})",
        (*args, *words),
    ).fetchall()
    docs = {int(r[0]): (str(r[1]), str(r[2]), str(r[3]), str(r[4])) for r in rows}
    visible = {int(r[0]) for r in rows if r[5]}
    scores = bm25_scores(docs, words, n_docs, avgdl)
    best = sorted((s for s in scores if s in visible), key=scores.__getitem__, reverse=True)
    if dense is not None and len(best) > retrieval.POOL:
        cut = best[: retrieval.PREFETCH_DENSE]
        best = retrieval._fused_cut(cut, dense(cut))
    best = best[: retrieval.POOL]
    if not best:
        return []
    found = [
        (row_to_lesson(r), scores[int(r["seq"])])
        for r in conn.execute(
            f"SELECT l.seq, {retrieval._L_COLUMNS} FROM lessons l"
            f" WHERE l.seq IN ({','.join('?' * len(best))})",
            best,
        )
    ]
    found.sort(key=lambda x: x[1], reverse=True)
    return found
