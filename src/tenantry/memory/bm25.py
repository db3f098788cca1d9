"""BM25 as FTS5's ``bm25()`` computes it, over processed text in memory. Pure functions.

``retrieval`` asks FTS5 for its candidates; this scores given lessons on the
same scale where FTS5 cannot (PostgreSQL has no FTS5; a candidate found by
another list, scored on all of the query's terms). k1 = 1.2, b = 0.75, the
column weights of ``retrieval._BM25``; a term found in more than half of the
lessons weighs almost nothing (FTS5 floors its idf at 1e-6).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

K = TypeVar("K", bound=Hashable)

K1 = 1.2
B = 0.75
WEIGHTS = (3.0, 1.0, 2.0, 2.5)  # title, body, subjects, signature (as retrieval._BM25)


def idf(n_docs: int, df: int) -> float:
    x = math.log((n_docs - df + 0.5) / (df + 0.5))
    return x if x > 0 else 1e-6


Doc = tuple[int, dict[str, float]]  # a document's length and its terms' column-weighted counts


def doc(fields: Sequence[str]) -> Doc:
    """What BM25 needs of a document: its length (terms in all columns) and, per term,
    its counts in each column times the column's weight."""
    tf: dict[str, float] = {}
    length = 0
    for weight, col in zip(WEIGHTS, fields, strict=True):
        toks = col.split()
        length += len(toks)
        for t in toks:
            tf[t] = tf.get(t, 0.0) + weight
    return length, tf


def score(d: Doc, idfs: Mapping[str, float], avgdl: float) -> float | None:
    """BM25 of one document for the terms of ``idfs`` (term -> idf); None if it has none."""
    length, tf = d
    norm = K1 * (1 - B + B * length / (avgdl or 1.0))
    total = 0.0
    found = False
    for w, weight in idfs.items():
        x = tf.get(w)
        if x:
            found = True
            total += weight * x * (K1 + 1) / (x + norm)
    return total if found else None


def scores(
    docs: Mapping[K, Sequence[str]],
    words: Sequence[str],
    df: Callable[[str], int],
    n_docs: int,
    avgdl: float,
) -> dict[K, float]:
    """BM25 of each document (its columns' processed text) for ``words``; higher is better.

    ``df`` gives a term's document frequency in the whole index. A document
    with none of the words is left out.
    """
    idfs = {w: idf(n_docs, df(w)) for w in dict.fromkeys(words)}
    out: dict[K, float] = {}
    for key, fields in docs.items():
        x = score(doc(fields), idfs, avgdl)
        if x is not None:
            out[key] = x
    return out
