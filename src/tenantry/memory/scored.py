"""A term's postings with its BM25 score in each lesson, read once from FTS5 and kept.

FTS5's ``bm25()`` of a query is a sum over the query's terms of one score
per term and lesson (the term's idf times its saturated, length-normalised
frequency there), so a query's BM25 is the sum of its terms' lists. A recall
asks for the same rare terms again and again (the words of common errors), so
each term's whole list is computed by FTS5 once (one pass over its postings)
and kept in memory, until the statistics it was scored with change:

- in ``lessons_fts`` the scores depend on the number of lessons, the term's
  document frequency and the average length, all of which change only when a
  lesson is added (text is never rewritten), so a list is valid while
  ``LessonStore.n_docs`` is what it was;
- the trusted tier (``trusted_fts``) also changes when a lesson's trust or
  status does, so its lists are valid while ``LessonStore.generation`` (bumped
  by every write) is.

A recall then sums a few in-memory lists (``postings.merge``) instead of
having FTS5 score every posting of every rare term again. SQLite only (on
PostgreSQL the ranking is computed in Python, see ``retrieval_pg``). The
cache is bounded by the postings it holds (the oldest terms dropped first),
and a list of more than ``LIST_MAX`` postings is not kept (such terms go
through ``retrieval.top_postings``).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from tenantry.memory import bm25, terms
from tenantry.store.engine import Conn

if TYPE_CHECKING:
    from tenantry.memory.store import LessonStore

BM25_ARGS = ", ".join(str(w) for w in bm25.WEIGHTS)  # title, body, subjects, signature
POSTINGS_CACHED = 300_000  # postings kept in memory over all terms and both tables
LIST_MAX = 20_000  # a longer list is returned but not kept


Arrays = tuple[Any, Any]  # (store seqs int64, scores float64), in FTS5's row order


class ScoredPostings:
    """Term -> its lessons' store seqs and the term's BM25 score in each, per FTS5 table."""

    def __init__(self, capacity: int = POSTINGS_CACHED) -> None:
        self.capacity = capacity
        self.size = 0  # postings held
        # (table, term) -> (version the list was scored at, the list)
        self._lists: dict[tuple[str, str], tuple[int, Arrays]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._lists)

    def __contains__(self, key: object) -> bool:  # (table, term)
        return key in self._lists

    def get(self, conn: Conn, table: str, word: str, version: int) -> Arrays:
        """``word``'s list in ``table`` as scored at ``version``, computed if not kept."""
        import numpy as np

        key = (table, word)
        entry = self._lists.get(key)
        if entry is not None and entry[0] == version:
            return entry[1]
        rows = conn.execute(
            f"SELECT rowid, -bm25({table}, {BM25_ARGS}) FROM {table} WHERE {table} MATCH ?",
            (terms.fts_query([word]),),
        ).fetchall()
        found = (
            np.fromiter((r[0] for r in rows), np.int64, len(rows)),
            np.fromiter((r[1] for r in rows), np.float64, len(rows)),
        )
        with self._lock:  # the store's reader threads share the cache
            self._drop(key)
            if len(rows) <= LIST_MAX:
                while self._lists and self.size + len(rows) > self.capacity:
                    self._drop(next(iter(self._lists)))
                self._lists[key] = (version, found)
                self.size += len(rows)
        return found

    def _drop(self, key: tuple[str, str]) -> None:
        old = self._lists.pop(key, None)
        if old is not None:
            self.size -= len(old[1][0])


def version(store: LessonStore, table: str) -> int:
    """What a list of ``table`` was scored at: valid while this has not changed."""
    return store.n_docs if table == "lessons_fts" else store.generation
