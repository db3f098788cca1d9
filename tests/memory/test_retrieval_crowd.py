"""Retrieval among a crowd of agent-observed lessons: error lines and the trusted tier."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tenantry.memory import Lesson, LessonStore, Trust, bm25, retrieval, signature
from tenantry.store import open_store

from .conftest import facility_lesson

VIEWER = retrieval.Viewer("eve/claude-code/s1", "eve", "chem")


def keyed(les: Lesson, error: str) -> Lesson:
    sig = signature.normalize(error)
    return dataclasses.replace(les, error_signature=sig, sig_hash=signature.signature_hash(sig))


def test_a_line_is_also_keyed_without_the_path_it_ends_with() -> None:
    line = signature.normalize("OSError: [Errno 122] Disk quota exceeded: '/home/ana/.cache/x'")
    assert signature.without_tail(line) == signature.normalize(
        "OSError: [Errno 122] Disk quota exceeded"
    )
    assert signature.without_tail(signature.normalize("error: 12")) == ""  # too little left
    assert signature.without_tail(signature.normalize("Disk quota exceeded")) == ""


async def test_a_pasted_error_with_its_path_finds_the_lesson_keyed_without_it(
    tmp_path: Path,
) -> None:
    """Thousands of agent lessons may carry the full line (Python appends the path); the
    staff lesson is keyed on the message alone and must still match it exactly."""
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        crowd = [
            keyed(
                facility_lesson(
                    f"pip cache note {i}", f"pip failed writing {i} Disk quota exceeded"
                ),
                f"OSError: [Errno 122] Disk quota exceeded: '/home/u{i}/.cache/pip/{i}'",
            )
            for i in range(40)
        ]
        right = keyed(
            facility_lesson(
                "Disk quota exceeded in /home: move data to /project",
                "home is 50 GB; check with quota -s, move caches to /project",
                trust=Trust.STAFF_APPROVED,
            ),
            "OSError: [Errno 122] Disk quota exceeded",
        )
        await store.add_many([*crowd, right], "test")
        query = "OSError: [Errno 122] Disk quota exceeded: '/home/ana/.cache/pip/http/5/a/b/file'"
        hits = await retrieval.search(store, VIEWER, query, limit=5)
        assert hits and hits[0].lesson.id == right.id
        assert "signature" in hits[0].matched


def tier_case() -> tuple[list[Lesson], Lesson, Lesson]:
    """A crowd, six staff lessons, the lesson matching the question and a staff lesson
    matching one word of it."""
    crowd = [facility_lesson(f"account note {i}", "account usage") for i in range(45)]
    crowd += [facility_lesson(f"gpu note {i}", "gpu usage") for i in range(45)]
    crowd += [facility_lesson(f"login note {i}", "login node usage") for i in range(100)]
    crowd += [
        facility_lesson(
            f"{topic} policy", f"{topic} rules for everyone", trust=Trust.STAFF_APPROVED
        )
        for topic in ("scratch", "backup", "quota", "module", "container", "python")
    ]
    right = facility_lesson(
        "My benchmark jobs: account chem42-gpu for gpu benchmarks",
        "use account chem42-gpu for the gpu benchmarks",
    )
    other = facility_lesson(
        "Short test runs: use the debug partition",
        "a quick benchmark or test goes to the debug partition first",
        trust=Trust.STAFF_APPROVED,
    )
    return crowd, right, other


TIER_QUERY = "which account do I use for my gpu benchmarks"


async def test_the_trusted_tier_does_not_outvote_a_better_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the budget drops terms, the tier's lessons join the main list scored on its
    scale: a staff lesson matching one word of the question does not displace the lesson
    matching all of them (the tier once added its best lesson a full list's weight)."""
    monkeypatch.setattr(retrieval, "POSTINGS_BUDGET", 40)
    crowd, right, other = tier_case()
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many([*crowd, right, other], "test")
        ids = [h.lesson.id for h in await retrieval.search(store, VIEWER, TIER_QUERY, limit=5)]
        assert ids[0] == right.id
        assert other.id in ids  # still a candidate, below


async def test_the_trusted_tier_on_postgresql(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retrieval, "POSTINGS_BUDGET", 40)
    crowd, right, other = tier_case()
    async with open_store(pg_url) as db, LessonStore(db) as store:
        await store.add_many([*crowd, right, other], "test")
        assert store.n_tokens > 0
        ids = [h.lesson.id for h in await retrieval.search(store, VIEWER, TIER_QUERY, limit=5)]
        assert ids[0] == right.id
        assert other.id in ids


def test_bm25_in_memory_is_fts5s(tmp_path: Path) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "f.sqlite3")
    conn.execute("CREATE VIRTUAL TABLE f USING fts5 (title, body, subjects, signature)")
    docs = {
        1: ("gpu sweep", "account gpu gpu", "tool slurm", ""),
        2: ("account", "usage of the account", "", "account error"),
        3: ("cuda", "modules", "module cuda", ""),
    }
    for seq, fields in docs.items():
        conn.execute(
            "INSERT INTO f (rowid, title, body, subjects, signature) VALUES (?,?,?,?,?)",
            (seq, *fields),
        )
    words = ["gpu", "account"]
    want = dict(
        conn.execute(
            "SELECT rowid, -bm25(f, 3.0, 1.0, 2.0, 2.5) FROM f WHERE f MATCH ?",
            ('"gpu" OR "account"',),
        )
    )
    df = {"gpu": 1, "account": 2}
    tokens = sum(len(" ".join(x).split()) for x in docs.values())
    got = bm25.scores(docs, words, lambda w: df.get(w, 0), len(docs), tokens / len(docs))
    assert got.keys() == want.keys()
    for seq, x in want.items():
        assert got[seq] == pytest.approx(x, rel=1e-9)
