"""Signatures, terms and the FTS5 query builder (pure functions, real FTS5)."""

from __future__ import annotations

import sqlite3

import pytest

from tenantry.memory import signature, terms, vocab


def test_normalize_strips_what_varies_between_runs() -> None:
    a = signature.normalize(
        "slurmstepd: error: Detected 1 oom_kill event in StepId=4242.batch at 2025-01-02T03:04:05"
    )
    b = signature.normalize(
        "slurmstepd: error: Detected 3 oom_kill event in StepId=977.batch at 2026-11-30T23:59:00"
    )
    assert a == b
    assert "4242" not in a and "oom_kill" in a


def test_normalize_paths_hex_hosts_and_quotes() -> None:
    sig = signature.normalize(
        "OSError: [Errno 122] Disk quota exceeded: '/home/alice/.conda/pkgs/x-1.2.tar.bz2'"
        " on node0042 at 0x7ffd1234"
    )
    assert "/home/alice" not in sig and "<path>" in sig
    assert "node0042" not in sig and "<host>" in sig
    assert "0x7ffd" not in sig and "'" not in sig
    # module names keep their name, lose their version
    assert signature.normalize("module 'gcc/12.2.0' is unknown") == "module gcc/<n> is unknown"


def test_signature_lines_pick_error_lines_last_first() -> None:
    tail = (
        "compiling\nwarning: x\nld: cannot find -lcudart\n"
        "collect2: error: ld returned 1 exit status\n"
    )
    lines = signature.signature_lines(tail)
    assert lines[0].startswith("collect2: error")
    assert any("cannot find -lcudart" in ln for ln in lines)
    assert signature.primary_signature(tail) == lines[0]
    assert signature.signature_hash(lines[0]) != signature.signature_hash(lines[1])
    assert signature.signature_hash("") == ""


def test_terms_map_phrasings_onto_one_form() -> None:
    assert "oom" in terms.terms("CUDA out of memory")
    assert "oom" in terms.terms("job was OOM-killed")
    assert "timelimit" in terms.terms("exceeds the walltime")
    assert "timelimit" in terms.terms("TIME LIMIT")
    assert terms.stem("libraries") == "library"
    assert terms.stem("partitions") == "partition"
    assert terms.terms("the of and 1234567 0") == []


NASTY = [
    'sbatch: error: "Batch job submission failed": Invalid account or account/partition combo',
    "NEAR(foo bar) AND OR NOT * ^ : ( ) { } [ ] ' \" - + col:val",
    'path/to:"/scratch/x y"/*.h5 -- --help',
    "💥 ünïcödé ∑ \x00 \t\n",
    "",
]


@pytest.mark.parametrize("text", NASTY)
def test_fts_query_never_breaks_the_parser(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5 (a, tokenize = 'unicode61')")
    conn.execute(
        "INSERT INTO t VALUES (?)", (terms.index_text("batch job submission account partition"),)
    )
    words = terms.query_terms(text)
    if not words:
        return
    rows = conn.execute("SELECT rowid FROM t WHERE t MATCH ?", (terms.fts_query(words),)).fetchall()
    assert isinstance(rows, list)
    if "account" in text:
        assert rows == [(1,)]


@pytest.mark.parametrize(
    ("text", "implied"),
    [
        ("is there a scavenger queue for spare cycles", ["preempt"]),
        ("how do I get a whole node to myself", ["exclusive"]),
        ("show my job history for november", ["sacct"]),
        ("my program got killed by the cgroup", ["oom"]),
        ("what software is installed", ["avail", "spider"]),
        ("the cluster is full and nothing starts", ["pend", "resourc"]),
    ],
)
def test_the_documentation_vocabulary_names_slurm_and_lmod_concepts(
    text: str, implied: list[str]
) -> None:
    added = vocab.DEFAULT.expand(text)
    assert all(t in added for t in implied), added
    assert any("".join(implied[:1]) in p for p in vocab.DEFAULT.phrases(text))


def test_runtime_of_a_library_is_not_a_time_limit() -> None:
    # "run time" means the job's limit; "CUDA runtime" is a library, not a duration
    assert "timelimit" in vocab.DEFAULT.expand("what run time can I ask for")
    assert "timelimit" not in vocab.DEFAULT.expand("CUDA driver is too old for the runtime")


def test_literal_heads_are_words_every_match_contains() -> None:
    assert vocab._literal_heads(r"\bbill(?:ing|ed)?\b|\bcosts?\b|\bpay\b") == (
        "bill",
        "cost",
        "pay",
    )
    assert vocab._literal_heads(r"\brun times?\b|\bfront[- ]?end\b") == ("run time", "front")
    assert vocab._literal_heads(r"\b(?:compute|cpu)[ -]hours?\b|\bused up\b") is None


@pytest.mark.parametrize(
    "text",
    [
        "we ran out of compute hours on the GPU partition",
        "Is there a SCAVENGER queue? My Billing code is wrong",
        "slurmstepd: error: *** JOB 44 ON cn0087 CANCELLED AT 2026-11-28 DUE TO TIME LIMIT ***",
        "how long can a job last, a week? the CUDA runtime is too old",
        "",
    ],
)
def test_the_literal_prefilter_matches_the_same_rules_as_every_regex(text: str) -> None:
    e = vocab.Expander()
    every = [i for i, (pattern, *_) in enumerate(e._rules) if pattern.search(text)]
    assert e._matching(text) == every
    assert e.phrases(text) == [e._rules[i][3] for i in every]
