"""Lesson recall on PostgreSQL (``retrieval_pg``): FTS5's BM25, the same ranking as SQLite.

The BM25 computed in Python is checked against SQLite's own ``bm25()`` on the
same processed text; the whole search is checked against the SQLite store on
the paraphrase set (the same lessons first, the same visibility). The
PostgreSQL tests use the ``pg_url`` fixture (skipped without a server).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tenantry.memory import Kind, LessonStore, Scope, Status, retrieval
from tenantry.memory import terms as T
from tenantry.memory.retrieval_pg import bm25_scores
from tenantry.memory.store import fts_fields
from tenantry.store import open_store

from .conftest import fixture_lessons, new_lesson

VIEWER = retrieval.Viewer("eve/claude-code/s1", "eve", "chem")
QUERIES = [
    "slurmstepd: error: Detected 1 oom_kill event in StepId=99.batch",
    "my job ran out of memory",
    "sbatch: error: Batch job submission failed: Invalid account or account/partition",
    "job cancelled due to time limit",
    "module load cuda fails",
    "how do I get more compute hours",
    "disk quota exceeded on scratch",
]


def test_bm25_scores_are_fts5s_bm25() -> None:
    docs = {i: fts_fields(les) for i, les in enumerate(fixture_lessons(), 1)}
    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE VIRTUAL TABLE f USING fts5"
        " (title, body, subjects, signature, tokenize = 'unicode61')"
    )
    db.executemany("INSERT INTO f (rowid, title, body, subjects, signature) VALUES (?, ?, ?, ?, ?)",
                   [(i, *d) for i, d in docs.items()])  # fmt: skip
    avgdl = sum(len(" ".join(d).split()) for d in docs.values()) / len(docs)
    checked = 0
    for q in QUERIES:
        words = [w for w in T.query_terms(q) if w.isalnum()]  # tokens FTS5 keeps whole
        if not words:
            continue
        want = {
            int(r[0]): -float(r[1])
            for r in db.execute(
                "SELECT rowid, bm25(f, 3.0, 1.0, 2.0, 2.5) FROM f WHERE f MATCH ?",
                (T.fts_query(words),),
            )
        }
        got = bm25_scores(docs, words, len(docs), avgdl)
        assert set(got) == set(want), q
        for seq, score in want.items():
            assert got[seq] == pytest.approx(score, rel=1e-6), (q, seq)
        checked += len(want)
    assert checked > 10


def test_a_document_without_the_words_scores_nothing() -> None:
    docs = {1: ("oom", "memory kill", "", ""), 2: ("partition", "qos", "", "")}
    assert set(bm25_scores(docs, ["oom", "absent"], 2, 2.5)) == {1}
    assert bm25_scores(docs, [], 2, 2.5) == {}


async def test_postgres_recalls_what_sqlite_recalls(tmp_path: Path, pg_url: str) -> None:
    private = new_lesson(
        "out of memory on my private partition",
        "a lesson of another user's agent, never approved",
        kind=Kind.FAILURE_FIX,
        scope=Scope.USER,
        status=Status.CANDIDATE,
        owner_key="mallory/claude-code/s9",
    )
    found: dict[str, list[list[str]]] = {}

    async def recall(store: LessonStore) -> list[list[str]]:
        async with store:
            await store.add_many([*fixture_lessons(), private], "test")
            return [
                [h.lesson.id for h in await retrieval.search(store, VIEWER, q, limit=3)]
                for q in QUERIES
            ]

    found["sqlite"] = await recall(LessonStore(tmp_path / "m.sqlite3"))
    async with open_store(pg_url) as db:
        assert db.engine == "postgresql"
        found["postgresql"] = await recall(LessonStore(db))
    assert found["postgresql"] == found["sqlite"]
    assert all(found["postgresql"][:3])
    assert private.id not in {i for ids in found["postgresql"] for i in ids}
