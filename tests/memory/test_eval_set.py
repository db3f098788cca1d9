"""The labelled retrieval set (bench/data/memory_eval_hpc.jsonl) stays well formed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SET = Path(__file__).resolve().parents[2] / "bench" / "data" / "memory_eval_hpc.jsonl"
STYLES = {"pasted-error", "symptom", "how-to", "paraphrase", "keyword"}


def records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SET.read_text().splitlines() if line.strip()]


def test_every_query_names_lessons_of_the_set_and_a_known_style() -> None:
    rows = records()
    lessons = {r["id"] for r in rows if r["type"] == "lesson"}
    queries = [r for r in rows if r["type"] == "query"]
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "ids are unique (the held-out split hashes them)"
    assert len(lessons) >= 150 and len(queries) >= 300
    for q in queries:
        assert q["relevant"] and set(q["relevant"]) <= lessons, q["id"]
        assert set(q.get("must_not_return") or ()) <= lessons, q["id"]
        assert q["style"] in STYLES, q["id"]
        assert q.get("split", "heldout") == "heldout", q["id"]


def test_the_queries_marked_held_out_are_many_and_of_every_style() -> None:
    marked = [r for r in records() if r["type"] == "query" and r.get("split") == "heldout"]
    assert len(marked) >= 60
    assert {q["style"] for q in marked} == STYLES
