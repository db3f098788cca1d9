"""Error-message tokens (Slurm state names) and the ranking's signature similarity."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenantry.memory import (
    Kind,
    Lesson,
    LessonStore,
    Trust,
    retrieval,
    signature,
    terms,
)

from .conftest import facility_lesson

VIEWER = retrieval.Viewer("eve/claude-code/s1", "eve", "chem")


def lesson(title: str, body: str) -> Lesson:
    return facility_lesson(title, body, kind=Kind.FAILURE_FIX, trust=Trust.STAFF_APPROVED)


@pytest.mark.parametrize(
    ("text", "term"),
    [
        ("State: OUT_OF_MEMORY (exit code 0)", "oom"),
        ("job ended OUT-OF-MEMORY", "oom"),
        ("reason=TIME_LIMIT", "timelimit"),
        ("out of memory", "oom"),
    ],
)
def test_slurm_state_names_map_like_the_phrases(text: str, term: str) -> None:
    # sacct/squeue print states with underscores; they must meet the lessons' "out of memory"
    assert term in terms.terms(text)


async def test_an_underscored_state_finds_the_lesson_in_words(tmp_path: Path) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        oom = lesson(
            "Job killed for running out of memory",
            "Ask for a larger share of the node; seff shows the peak the job reached.",
        )
        other = lesson(
            "Job state FAILED with a non-zero exit code",
            "Look at the job's output file for the state and exit code of the failing step.",
        )
        await store.add_many([oom, other], "test")
        hits = await retrieval.search(store, VIEWER, "sacct shows state OUT_OF_MEMORY", limit=2)
        assert [h.lesson.id for h in hits][:1] == [oom.id]


@pytest.mark.parametrize(
    ("a", "others"),
    [
        ("sbatch error invalid qos", ["sbatch error invalid partition", "x y", ""]),
        ("a b c", ["d e"]),
        ("", ["a"]),
        ("a", []),
    ],
)
def test_best_similarity_is_the_best_pairwise_similarity(a: str, others: list[str]) -> None:
    want = max((signature.similarity(a, b) for b in others), default=0.0)
    got = signature.best_similarity(a, [set(b.split()) for b in others])
    assert got == pytest.approx(want)
