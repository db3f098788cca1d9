"""Retrieval where the term budget bites, and queries in everyday words."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tenantry.memory import Lesson, LessonStore, Trust, retrieval

from .conftest import facility_lesson

VIEWER = retrieval.Viewer("eve/claude-code/s1", "eve", "chem")


def lesson(title: str, body: str, trust: Trust = Trust.AGENT_OBSERVED) -> Lesson:
    return facility_lesson(title, body, trust=trust)


async def test_common_topical_terms_are_not_starved_by_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(retrieval, "POSTINGS_BUDGET", 50)
    rng = random.Random(3)
    filler = ["build", "cache", "node", "login", "output", "script", "config", "thread"]
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        # hundreds of lessons each sharing one of the query's words, none all three
        crowd = []
        for i in range(300):
            word = ("gpu", "partition", "walltime")[i % 3]
            text = " ".join(rng.choices(filler, k=6))
            crowd.append(lesson(f"{word} note {i}", f"{word} {text}"))
        await store.add_many(crowd, "test")
        right = lesson(
            "gpu partition walltime is 24 hours",
            "The gpu partition allows a walltime of 24 hours and 4 nodes per job.",
            Trust.STAFF_APPROVED,
        )
        await store.add(right, "test")
        hits = await retrieval.search(store, VIEWER, "gpu partition walltime", limit=5)
        assert hits and hits[0].lesson.id == right.id


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
