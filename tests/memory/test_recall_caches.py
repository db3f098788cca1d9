"""What recalls keep in memory between them: each term's scored postings and decoded lessons.

Both are caches of what the store holds; every test here changes the store
through ``LessonStore`` and checks that the next recall sees the change.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tenantry.memory import Lesson, LessonStore, Status, Trust, retrieval, terms
from tenantry.memory.scored import ScoredPostings

from .conftest import facility_lesson

VIEWER = retrieval.Viewer("eve/claude-code/s1", "eve", "chem")


def lesson(title: str, body: str, trust: Trust = Trust.PROBE_VERIFIED) -> Lesson:
    return facility_lesson(title, body, trust=trust)


async def fts5_scores(store: LessonStore, table: str, words: list[str]) -> dict[int, float]:
    """FTS5's own BM25 of ``words`` (a query of all of them) in ``table``, higher is better."""
    bm25 = retrieval._BM25.replace("lessons_fts", table)
    rows = await store.db.fetchall(
        f"SELECT rowid, {bm25} FROM {table} WHERE {table} MATCH ?", (terms.fts_query(words),)
    )
    return {int(r[0]): -float(r[1]) for r in rows}


async def summed(
    store: LessonStore, table: str, words: list[str], version: int
) -> dict[int, float]:
    """The sum of the words' cached lists, per lesson."""

    def fn(conn: object) -> dict[int, float]:
        total: dict[int, float] = {}
        for w in words:
            seqs, vals = store.scored.get(conn, table, w, version)  # type: ignore[arg-type]
            for seq, x in zip(seqs.tolist(), vals.tolist(), strict=True):
                total[seq] = total.get(seq, 0.0) + x
        return total

    return await store.db.read(fn)


async def test_a_querys_bm25_is_the_sum_of_its_terms_cached_lists(tmp_path: Path) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many(
            [
                lesson("scratch quota exceeded", "scratch is purged after 60 days; quota 10 TB"),
                lesson("home quota", "home quota is 50 GB, quota quota"),
                lesson("gpu partition", "the gpu partition allows 24 hours"),
                lesson("scratch gpu", "stage data to scratch before a gpu job"),
            ],
            "t",
        )
        words = ["scratch", "quota", "gpu"]
        want = await fts5_scores(store, "lessons_fts", words)
        got = await summed(store, "lessons_fts", words, store.n_docs)
        assert set(got) == set(want)
        for seq, x in want.items():
            assert abs(got[seq] - x) < 1e-9


async def test_a_list_is_scored_again_once_a_lesson_is_added(tmp_path: Path) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many([lesson(f"quota {i}", "quota note") for i in range(3)], "t")
        first = await summed(store, "lessons_fts", ["quota"], store.n_docs)
        await store.add(lesson("quota quota", "quota quota quota"), "t")
        again = await summed(store, "lessons_fts", ["quota"], store.n_docs)
        assert len(first) == 3 and len(again) == 4
        # the idf and average length changed: the old lessons' scores are not the old ones
        assert again == await fts5_scores(store, "lessons_fts", ["quota"])
        assert any(abs(again[seq] - first[seq]) > 1e-12 for seq in first)


async def test_a_lesson_entering_the_trusted_tier_is_found_by_the_next_recall(
    tmp_path: Path,
) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        low = lesson("conda env on scratch", "build the conda env on scratch", Trust.AGENT_OBSERVED)
        await store.add_many([low, lesson("conda module", "module load conda first")], "t")
        before = await summed(store, "trusted_fts", ["conda"], store.generation)
        await store.transition(low.id, "staff", "approved", trust=Trust.STAFF_APPROVED)
        after = await summed(store, "trusted_fts", ["conda"], store.generation)
        assert len(before) == 1 and len(after) == 2


async def test_the_cache_holds_at_most_its_capacity_of_postings(tmp_path: Path) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many([lesson(f"w{i % 4} note", f"w{i % 4} body") for i in range(40)], "t")
        cache = ScoredPostings(capacity=25)

        def fill(conn: object) -> None:
            for w in ("w0", "w1", "w2", "w3"):
                seqs, _ = cache.get(conn, "lessons_fts", w, store.n_docs)  # type: ignore[arg-type]
                assert isinstance(seqs, np.ndarray) and len(seqs) == 10

        await store.db.read(fill)
        assert cache.size <= 25 and len(cache) == 2


async def test_a_recall_after_a_lifecycle_change_shows_the_new_state(tmp_path: Path) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        les = lesson("lustre stripe count for big files", "lfs setstripe -c 8 on big files")
        await store.add_many([les, lesson("lustre quota", "lfs quota -u $USER")], "t")
        query = "lustre stripe big files"
        hits = await retrieval.search(store, VIEWER, query, limit=3)
        assert hits[0].lesson.id == les.id and hits[0].lesson.trust is Trust.PROBE_VERIFIED
        await store.transition(les.id, "staff", "approved", trust=Trust.STAFF_APPROVED)
        hits = await retrieval.search(store, VIEWER, query, limit=3)
        assert hits[0].lesson.trust is Trust.STAFF_APPROVED
        await store.transition(les.id, "staff", "retracted", status=Status.RETRACTED)
        hits = await retrieval.search(store, VIEWER, query, limit=3)
        assert les.id not in [h.lesson.id for h in hits]


async def test_a_caller_changing_a_returned_lesson_does_not_change_the_next_recall(
    tmp_path: Path,
) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        les = lesson("sbatch array throttle", "use --array=0-99%10 to run ten at a time")
        les.subject = {"tool": "slurm"}
        await store.add_many([les, lesson("array limits", "MaxArraySize is 10001")], "t")
        first = (await retrieval.search(store, VIEWER, "array throttle", limit=2))[0].lesson
        first.subject["tool"] = "changed"
        first.trust = Trust.UNTRUSTED
        first.title = "changed"
        again = (await retrieval.search(store, VIEWER, "array throttle", limit=2))[0].lesson
        assert again.id == les.id
        assert (again.subject, again.trust, again.title) == (
            {"tool": "slurm"},
            Trust.PROBE_VERIFIED,
            "sbatch array throttle",
        )


async def test_a_query_of_frequent_terms_only_reads_its_rarest_terms_best_postings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its rarest term is over the budget alone: that term's best postings, not its whole list."""
    monkeypatch.setattr(retrieval, "POSTINGS_BUDGET", 5)
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        crowd = [lesson(f"quota note {i}", "quota " + "filler " * (i % 7)) for i in range(30)]
        best = lesson("quota quota quota", "quota quota quota quota")
        await store.add_many([*crowd, best], "t")
        hits = await retrieval.search(store, VIEWER, "quota", limit=3)
        assert hits[0].lesson.id == best.id
        assert "quota" in store.top_postings
        assert ("lessons_fts", "quota") not in store.scored
