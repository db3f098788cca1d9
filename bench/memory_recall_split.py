"""Where a recall's time goes at 100k lessons, and what it returns, in process.

    PYTHONPATH=src:bench python bench/memory_recall_split.py STORE [--queries 300]
        [--tops OUT.json]

``STORE`` is a store ``memory_eval.py --db STORE`` built (its ``.vectors``
beside it). Warms the frequent terms' lists as a daemon does, runs 50 pasted
20-term error queries, then times ``--queries`` more with the store's reads
run inline on the event loop's thread, ``time.thread_time`` around every SQL
statement (grouped by what it does), and prints the CPU per recall (p50,
mean) and the SQL parts per recall. With ``--tops`` it also writes the top 10
ids of every labelled query and of 200 synthetic pasted ones, so two codes'
rankings can be compared (run it with each code's ``src`` first on
``PYTHONPATH``). See bench/memory.md, "Latency round".
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import time
from pathlib import Path
from typing import Any

import memory_eval as me
from tenantry.memory import embedding, retrieval
from tenantry.memory.store import LessonStore
from tenantry.memory.vectors import VectorIndex

SET = Path(__file__).parent / "data" / "memory_eval_hpc.jsonl"
spent: collections.Counter[str] = collections.Counter()
calls: collections.Counter[str] = collections.Counter()


def part(sql: str) -> str:
    if "MATCH" in sql:
        return "tier BM25" if "trusted_fts" in sql else "main-index BM25"
    if "sig_hash = ?" in sql:
        return "signatures"
    if sql.startswith("SELECT l.seq FROM"):
        return "visibility"
    if sql.startswith("SELECT l.seq, "):
        return "rows"
    return "other"


class _Cursor:
    def __init__(self, cur: Any, key: str) -> None:
        self.cur, self.key = cur, key

    def _timed(self, fn: Any) -> Any:
        t = time.thread_time()
        out = fn()
        spent[self.key] += time.thread_time() - t
        return out

    def fetchall(self) -> Any:
        return self._timed(self.cur.fetchall)

    def fetchone(self) -> Any:
        return self._timed(self.cur.fetchone)

    def __iter__(self) -> Any:
        return iter(self._timed(lambda: list(self.cur)))


class _Conn:
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def execute(self, sql: str, args: Any = ()) -> _Cursor:
        key = part(sql)
        calls[key] += 1
        t = time.thread_time()
        cur = self.conn.execute(sql, args)
        spent[key] += time.thread_time() - t
        return _Cursor(cur, key)


async def run(db: Path, n: int, tops: str | None) -> None:
    raw, queries = me.load(SET)
    async with LessonStore(db) as store:
        vectors = VectorIndex(db.with_suffix(".vectors"), embedding.bundled())
        vectors.open()
        await vectors.sync(store)
        await retrieval.warm_top_postings(store)
        pool = store.db._read_conns  # type: ignore[attr-defined]

        async def inline(fn: Any) -> Any:
            conn = pool.get()
            try:
                return fn(_Conn(conn))
            finally:
                pool.put(conn)

        store.db.read = inline  # type: ignore[method-assign]
        synth = me.Synth(8, " ".join(d["body"] for d in raw))
        viewer = retrieval.Viewer(me.DEFAULT_PRINCIPAL, "eval", me.DEFAULT_PROJECT)
        texts = [synth.pasted_query(20) for _ in range(n + 50)]
        for text in texts[:50]:
            await retrieval.search(store, viewer, text, limit=5, vectors=vectors)
        spent.clear()
        calls.clear()
        cpu = []
        for text in texts[50:]:
            c0 = time.thread_time()
            await retrieval.search(store, viewer, text, limit=5, vectors=vectors)
            cpu.append((time.thread_time() - c0) * 1000)
        cpu.sort()
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print(
            f"CPU per recall p50 {cpu[len(cpu) // 2]:.2f} ms, mean {sum(cpu) / len(cpu):.2f} ms"
            f" (load {load})"
        )
        for key, s in spent.most_common():
            print(f"  {key:16s} {s * 1000 / n:6.2f} ms  {calls[key] / n:4.1f} statements")
        print(f"  SQL in all       {sum(spent.values()) * 1000 / n:6.2f} ms")
        if tops:
            out = {}
            for q in queries:
                hits = await retrieval.search(
                    store, me.viewer_of(q), q["text"], limit=10, vectors=vectors
                )
                out[q["id"]] = [h.lesson.id for h in hits]
            other = me.Synth(9, " ".join(d["body"] for d in raw))
            for i in range(200):
                hits = await retrieval.search(
                    store, viewer, other.pasted_query(20), limit=10, vectors=vectors
                )
                out[f"synthetic-{i}"] = [h.lesson.id for h in hits]
            Path(tops).write_text(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--tops", help="also write every labelled query's top 10 ids here")
    args = ap.parse_args()
    asyncio.run(run(args.store, args.queries, args.tops))


if __name__ == "__main__":
    main()
