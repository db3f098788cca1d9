"""bench/memory_eval.py's tuning aids: development folds and an extra synonyms table."""

from __future__ import annotations

import re
from pathlib import Path

import memory_eval as me
from tenantry.memory import vocab
from tenantry.memory.store import LessonStore

DATA = Path(__file__).resolve().parents[2] / "bench" / "data"
SET = DATA / "memory_eval_hpc.jsonl"
HELP_TABLE = DATA / "slurm_help_synonyms.txt"


def test_the_folds_split_the_development_queries_and_ignore_the_held_out_split() -> None:
    _, queries = me.load(SET)
    dev = [q for q in queries if not me.held_out(q)]
    sizes = [sum(1 for q in dev if me.fold(q) == i) for i in range(4)]
    assert min(sizes) >= 40, sizes  # four folds of comparable size, none degenerate
    # the fold is a hash of the id alone: a query keeps its fold whatever its split
    q = dict(dev[0])
    assert me.fold({**q, "split": "heldout"}) == me.fold(q)


async def test_evaluate_reports_the_mrr_of_each_fold(tmp_path: Path) -> None:
    lessons = [
        {"id": "quota", "title": "Home quota is 50 GB", "body": "check it with quota -s"},
        {"id": "array", "title": "Job arrays up to 1000 tasks", "body": "sbatch --array=1-1000"},
    ]
    queries = [
        {"id": f"q{i}", "text": text, "relevant": [want]}
        for i, (text, want) in enumerate(
            [("home quota", "quota"), ("job array tasks", "array")] * 4
            + [("home quota", "array"), ("job array tasks", "quota")] * 2
        )
    ]
    async with LessonStore(tmp_path / "m.sqlite3") as store:
        await store.add_many(
            [me.to_lesson({**d, "source": "staff", "trust": "staff-approved"}) for d in lessons],
            "t",
        )
        ev = await me.evaluate(store, queries, {})
    ranks = {m["id"]: m["rank"] for m in ev["misses"]}  # not among the misses: rank 1
    rr = {q["id"]: 1.0 / (ranks.get(q["id"], 1) or float("inf")) for q in queries}
    for i, got in enumerate(ev["per_fold_mrr@10"]):
        mine = [rr[q["id"]] for q in queries if me.fold(q) == i]
        assert got == (round(sum(mine) / len(mine), 4) if mine else 0.0)
    assert sorted(set(ev["per_fold_mrr@10"])) != [1.0]  # the wrong labels do count


def test_the_help_table_loads_as_a_synonyms_file_and_names_the_options() -> None:
    rules = [
        line
        for line in HELP_TABLE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(rules) >= 25
    for line in rules:
        pattern, sep, added = line.rpartition(" = ")
        assert sep and added.strip(), line
        re.compile(pattern)  # every rule is a valid regex
        assert "=" not in pattern, line  # with_file splits at the last "="
    extended = vocab.Expander.with_file(HELP_TABLE)
    for text, option in [
        ("what is the quality of service of my job", "qos"),
        ("run it on a specific node", "nodelist"),
        ("how do I avoid a broken node", "exclude"),
        ("put the job id into a variable in my script", "parsable"),
        ("which partitions are there", "sinfo"),
    ]:
        assert option not in vocab.DEFAULT.expand(text), text  # not in the default table
        assert option in extended.expand(text), text
