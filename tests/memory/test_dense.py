"""The bundled embedding model, the vector file beside the store, and dense re-ranking."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tenantry.memory import (
    Kind,
    Lesson,
    LessonStore,
    Status,
    embedding,
    retrieval,
    vectors,
)
from tenantry.memory.vectors import VectorIndex

from .conftest import fixture_lessons, new_lesson

VIEWER = retrieval.Viewer("eve/claude-code/s1", "eve", "chem")


def model() -> embedding.Embedder:
    m = embedding.bundled()
    assert m is not None, "the wordllama wheel (a dependency) ships the model"
    return m


def test_clean_strips_what_varies_between_runs() -> None:
    text = (
        "slurmstepd: error: *** JOB 4471823 ON cn0087 CANCELLED AT 2026-11-28T03:12:44"
        " DUE TO TIME LIMIT *** see /scratch/ana/run7/out.log 0x7ffd12"
    )
    assert embedding.clean(text) == (
        "slurmstepd: error: *** JOB ON CANCELLED AT DUE TO TIME LIMIT *** see"
    )


def test_model_loads_from_the_wheel_without_network() -> None:
    files = embedding.package_files()
    assert files is not None and all(p.is_file() for p in files)
    m = model()
    assert m.dim == embedding.DIM
    v = m.embed(["job killed for using too much memory", ""])
    assert v.shape == (2, m.dim)
    assert abs(float(np.linalg.norm(v[0])) - 1.0) < 1e-4
    assert not v[1].any()  # no tokens: a zero row, never NaN


def test_a_paraphrase_is_nearer_than_an_unrelated_lesson() -> None:
    m = model()
    q = m.embed_one("the scheduler killed my program for using too much RAM")
    near = m.embed_one("Job killed by the cgroup OOM handler: ask for more memory per node")
    far = m.embed_one("Invalid partition name: the partition is called cpu, not compute")
    assert float(q @ near) > float(q @ far) + 0.05


def test_the_query_vector_carries_the_vocabulary_words_for_its_own() -> None:
    """A question in everyday words is embedded with the facility's words for them.

    Without them "standby nodes" is nearer an unrelated lesson about interactive
    sessions than the preempt partition's lesson; with them it is the other way.
    """
    from tenantry.memory import vocab

    m = model()
    preempt = m.embed_one(
        "preempt partition: idle nodes for free, but jobs can be requeued at any time."
        " Submit with -p preempt; a preempted job is requeued."
    )
    other = m.embed_one("Interactive session on a compute node: salloc then srun --pty bash")
    q = "which jobs run on the standby nodes"
    text = retrieval.dense_text(q, vocab.DEFAULT)
    assert text.startswith(q) and "preempt" in text
    plain, carried = m.embed_one(q), m.embed_one(text)
    assert float(plain @ preempt) < float(plain @ other)
    assert float(carried @ preempt) > float(carried @ other) + 0.1
    assert retrieval.dense_text("sbatch: error: Invalid qos", vocab.DEFAULT).endswith("qos")


async def test_vectors_persist_and_reopen_without_embedding_again(tmp_path: Path) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many(fixture_lessons(), "test")
        index = VectorIndex(tmp_path / "m.vectors", model())
        assert await index.sync(store, limit=7) == 7  # a bounded step, as a query does
        assert await index.sync(store) == 13
        assert await index.sync(store) == 0
        again = VectorIndex(tmp_path / "m.vectors", model())
        again.open()
        assert len(again) == 20 and again.last_seq == index.last_seq
        assert await again.sync(store) == 0
        q = model().embed_one("no room left in my home folder")
        assert again.similarities(q, ["quota-home"]) == pytest.approx(
            index.similarities(q, ["quota-home"]), abs=1e-6
        )


async def test_a_torn_or_foreign_vector_file_is_repaired(tmp_path: Path) -> None:
    path = tmp_path / "m.vectors"
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many(fixture_lessons(), "test")
        index = VectorIndex(path, model())
        await index.sync(store)
        with path.open("ab") as f:
            f.write(b"\0" * 100)  # a crash in the middle of an append
        torn = VectorIndex(path, model())
        torn.open()
        assert len(torn) == 20
        assert (path.stat().st_size - vectors._HEADER) % torn._dtype.itemsize == 0
        path.write_bytes(b'{"model": "another", "dim": 8}'.ljust(vectors._HEADER))
        foreign = VectorIndex(path, model())
        foreign.open()
        assert len(foreign) == 0  # rebuilt from the store, never read as this model's
        assert await foreign.sync(store) == 20


PARAPHRASES = [
    # (query in everyday words, the lesson that answers it); lexical ranking alone puts
    # another lesson first for all but the second
    (
        "creating my environment has been stuck resolving dependencies for an hour",
        "conda-solve-slow",
    ),
    ("no room left in my home folder, how do I clean it", "quota-home"),
    ("my job just dies halfway through and the state says OUT_OF_MEMORY", "slurm-oom-step"),
    ("is there a way to skip the queue if my job can be interrupted", "slurm-preempt-partition"),
]


async def test_dense_reranking_finds_paraphrases_lexical_ranking_misses(tmp_path: Path) -> None:
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many(fixture_lessons(), "test")
        index = VectorIndex(tmp_path / "m.vectors", model())
        await index.sync(store)
        lexical_first, dense_first = 0, 0
        for text, want in PARAPHRASES:
            plain = await retrieval.search(store, VIEWER, text, limit=3)
            dense = await retrieval.search(store, VIEWER, text, limit=3, vectors=index)
            lexical_first += bool(plain) and plain[0].lesson.id == want
            dense_first += bool(dense) and dense[0].lesson.id == want
            assert want in [h.lesson.id for h in dense], text
        assert dense_first == len(PARAPHRASES)
        assert lexical_first < dense_first


async def test_dense_never_lifts_an_untrusted_or_stale_lesson_over_a_trusted_one(
    tmp_path: Path,
) -> None:
    good = fixture_lessons()
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many(good, "test")
        # an agent-observed lesson worded exactly like the query, but stale
        copy = new_lesson(
            "stuck resolving dependencies for an hour creating my environment",
            "creating my environment has been stuck resolving dependencies for an hour",
            status=Status.STALE,
            owner_key="mallory/claude-code/s9",
            id="stale-copy",
        )
        await store.add(copy, "test")
        index = VectorIndex(tmp_path / "m.vectors", model())
        hits = await retrieval.search(store, VIEWER, PARAPHRASES[0][0], limit=30, vectors=index)
        ids = [h.lesson.id for h in hits]
        assert ids[0] == "conda-solve-slow"
        assert len(index) == 21  # the query embedded the new lesson itself (inline sync)
        # the nearest by far in both rankings, yet after every trusted, current lesson
        assert ids[-1] == "stale-copy"


async def test_the_service_runs_lexical_only_when_dense_is_off(state_dir: str) -> None:
    from tenantry.core.events import Bus
    from tenantry.core.settings import load
    from tenantry.memory import MemoryService
    from tenantry.service.runtime import Runtime

    from .conftest import principal

    settings = load(
        env={},
        overrides={"state_dir": state_dir, "memory_dense": False, "memory_verify_interval_s": 0.0},
    )
    runtime = Runtime(settings, journal=None, bus=Bus(), backend=None)  # type: ignore[arg-type]
    svc = MemoryService(runtime)
    await svc.start()
    try:
        assert svc.vectors is None
        who = principal("alice")
        await svc.remember(
            who, title="Conda solve takes forever", body="use libmamba", kind=Kind.RECIPE
        )
        assert [h["title"] for h in await svc.recall(who, "conda solve")] == [
            "Conda solve takes forever"
        ]
        assert not (Path(state_dir) / "memory.vectors").exists()
    finally:
        await svc.aclose()


async def test_among_exact_error_line_matches_the_trusted_answer_comes_first(
    tmp_path: Path,
) -> None:
    """Many agent lessons share a pasted Slurm error line with one staff-approved answer.

    The agents' lessons repeat the error's words (BM25 and the dense model both
    like them better); the staff answer talks about the fix. The dense order
    must not put an agent observation above the trusted exact match.
    """
    from tenantry.memory import Trust, signature

    line = (
        "sbatch: error: Batch job submission failed:"
        " Invalid account or account/partition combination specified"
    )
    sig = signature.normalize(line)

    def with_sig(les: Lesson) -> Lesson:
        les.error_signature, les.sig_hash = sig, signature.signature_hash(sig)
        return les

    crowd = [
        with_sig(
            new_lesson(
                f"Invalid account or partition combination specified ({i})",
                f"sbatch failed: invalid account or account/partition combination ({i}).",
                owner_key=f"u{i}/claude-code/s{i}",
            )
        )
        for i in range(20)
    ]
    staff = with_sig(
        new_lesson(
            "Pass -A with one of your Slurm accounts",
            "List them with sacctmgr show assoc user=$USER; set -A in the script.",
            trust=Trust.STAFF_APPROVED,
        )
    )
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many([*crowd, staff], "test")
        index = VectorIndex(tmp_path / "m.vectors", model())
        await index.sync(store)
        hits = await retrieval.search(store, VIEWER, line, limit=5, vectors=index)
        assert hits[0].lesson.id == staff.id
