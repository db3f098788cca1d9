"""Retrieval where the term budget bites, and queries in everyday words."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenantry.memory import Lesson, LessonStore, Trust, retrieval

from .conftest import facility_lesson

VIEWER = retrieval.Viewer("eve/claude-code/s1", "eve", "chem")


def lesson(title: str, body: str, trust: Trust = Trust.AGENT_OBSERVED) -> Lesson:
    return facility_lesson(title, body, trust=trust)


FILLER = ["build", "cache", "node", "login", "output", "script", "config", "thread"]


def one_word_each(
    rng: random.Random, words: tuple[str, ...], n: int, k: int
) -> Iterator[tuple[int, str, str]]:
    """``n`` times (i, one of ``words`` in turn, ``k`` filler words drawn from ``rng``)."""
    for i in range(n):
        yield i, words[i % len(words)], " ".join(rng.choices(FILLER, k=k))


async def found_among(
    store: LessonStore, crowd: list[Lesson], right: Lesson, query: str
) -> list[str]:
    """Store ``crowd``, then ``right``: the ids of the five lessons ``query`` finds, best first."""
    await store.add_many(crowd, "test")
    await store.add(right, "test")
    return [h.lesson.id for h in await retrieval.search(store, VIEWER, query, limit=5)]


async def test_common_topical_terms_are_not_starved_by_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retrieval, "POSTINGS_BUDGET", 50)
    rng = random.Random(3)
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        # hundreds of lessons each sharing one of the query's words, none all three
        words = ("gpu", "partition", "walltime")
        crowd = [
            lesson(f"{word} note {i}", f"{word} {text}")
            for i, word, text in one_word_each(rng, words, 300, 6)
        ]
        right = lesson(
            "gpu partition walltime is 24 hours",
            "The gpu partition allows a walltime of 24 hours and 4 nodes per job.",
            Trust.STAFF_APPROVED,
        )
        ids = await found_among(store, crowd, right, "gpu partition walltime")
        assert ids and ids[0] == right.id


async def test_rare_identifiers_do_not_push_out_the_topical_terms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The budget takes the rarest terms (a pasted host name); the topical ones still count.

    The right lesson is agent-observed, so the trusted tier cannot rescue it:
    only the frequent terms' own best postings can.
    """
    monkeypatch.setattr(retrieval, "POSTINGS_BUDGET", 40)
    rng = random.Random(5)
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        crowd = []
        for i in range(30):  # the host name is rare, but every lesson with it is off topic
            crowd.append(lesson(f"node cn0417 note {i}", " ".join(rng.choices(FILLER, k=8))))
        # the topical words are frequent, one at a time
        words = ("preemptible", "requeue", "checkpoint")
        crowd += [
            lesson(f"{word} {text}", f"{word} {text}")
            for _, word, text in one_word_each(rng, words, 240, 10)
        ]
        right = lesson(
            "preemptible: requeue and checkpoint",
            "When preemptible, --requeue and checkpoint.",
        )
        query = "preemptible killed on cn0417, how do I requeue and checkpoint"
        assert right.id in (await found_among(store, crowd, right, query))[:3]
        monkeypatch.setattr(retrieval, "TOP_PER_TERM", 0)  # the old cap: rarest terms only
        hits = await retrieval.search(store, VIEWER, query, limit=5)
        assert right.id not in [h.lesson.id for h in hits[:3]]


async def test_top_postings_take_in_lessons_added_later(tmp_path: Path) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many([lesson(f"quota note {i}", "quota " * 2) for i in range(5)], "t")
        first = await store.db.read(lambda c: retrieval.top_postings(c, store, "quota"))
        assert len(first) == 5
        late = await store.add(lesson("quota", "quota quota quota"), "t")
        again = await store.db.read(lambda c: retrieval.top_postings(c, store, "quota"))
        assert len(again) == 6
        seq = await store.db.read(
            lambda c: c.execute("SELECT seq FROM lessons WHERE id = ?", (late.id,)).fetchone()[0]
        )
        assert max(again, key=again.__getitem__) == seq


async def test_everyday_words_find_the_facility_words(tmp_path: Path) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        alloc = lesson(
            "Allocation used up: jobs pend with AssocGrpBillingMinutes",
            "When the project's core-hour allocation is spent, jobs pend; sshare shows usage.",
        )
        preempt = lesson(
            "preempt: idle nodes for free, requeued when a paying job needs them",
            "Use --requeue and checkpoint; jobs there are preempted.",
        )
        await store.add_many([alloc, preempt, lesson("cuda modules", "cuda/12.2 default")], "t")
        hits = await retrieval.search(store, VIEWER, "how much of our budget is left", limit=3)
        assert hits and hits[0].lesson.id == alloc.id
        hits = await retrieval.search(store, VIEWER, "can I skip the queue", limit=3)
        assert preempt.id in [h.lesson.id for h in hits]


async def test_warm_up_fills_the_frequent_terms_only(tmp_path: Path) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        many = [lesson(f"scratch purge {i}", "scratch files are purged") for i in range(6)]
        await store.add_many([*many, lesson("gpu", "one gpu note")], "t")
        warmed = await retrieval.warm_top_postings(store, min_df=3)
        assert warmed == len(store.top_postings) > 0
        assert "scratch" in store.top_postings and "gpu" not in store.top_postings
        assert len(store.top_postings["scratch"][2]) == 6
        # within the budget: its whole scored list too, the rarer term's not
        assert ("lessons_fts", "scratch") in store.scored
        assert ("lessons_fts", "gpu") not in store.scored
