"""The frequent terms' best postings of one query, summed per lesson. Pure functions.

A query at 100k lessons adds up to 16 frequent terms' best postings (400 each,
see ``retrieval.top_postings``) to the BM25 scores of its rare terms, and keeps
the best few dozen lessons. Thousands of additions per candidate list: numpy
does them when it is installed (the bundled model's dependency), a dictionary
loop otherwise; both give the same lessons, scores and order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

ARRAYS_CACHED = 4096  # postings lists kept converted to arrays (all dropped when full)
VECTORIZE_FROM = 1000  # postings per query from which numpy is worth its call overhead

_ARRAYS: dict[int, tuple[dict[int, float], Any, Any]] = {}  # id(postings) -> (it, seqs, scores)


def _arrays(np: Any, postings: dict[int, float]) -> tuple[Any, Any]:
    """A frequent term's best postings as numpy arrays, converted once per list.

    The lists of ``retrieval.top_postings`` are never changed once made (a newer
    list replaces one), so a list's identity names its arrays.
    """
    entry = _ARRAYS.get(id(postings))
    if entry is None or entry[0] is not postings or len(entry[1]) != len(postings):
        if len(_ARRAYS) >= ARRAYS_CACHED:
            _ARRAYS.clear()
        n = len(postings)
        entry = (
            postings,
            np.fromiter(postings.keys(), np.int64, n),
            np.fromiter(postings.values(), np.float64, n),
        )
        _ARRAYS[id(postings)] = entry  # the entry holds the dict, so its id is not reused
    return entry[1], entry[2]


def merge(
    scores: dict[int, float], common: Sequence[dict[int, float]], keep: int
) -> dict[int, float]:
    """``scores`` plus every frequent term's postings, summed per lesson; the best ``keep``.

    Thousands of postings per query: summed with numpy when it is installed (the
    dense model's dependency), else by a dictionary loop; both give the same
    lessons in the same order (ties by first appearance).
    """
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with the bundled model
        return merge_loop(scores, common, keep)
    if sum(len(p) for p in common) < VECTORIZE_FROM:
        return merge_loop(scores, common, keep)
    return merge_numpy(np, scores, common, keep)


def as_arrays(postings: dict[int, float]) -> tuple[Any, Any]:
    """A list of ``retrieval.top_postings`` as (seqs, scores) arrays (converted once)."""
    import numpy as np

    return _arrays(np, postings)


def merge_lists(parts: Sequence[tuple[Any, Any]], keep: int) -> dict[int, float]:
    """``merge_arrays`` of lists kept as arrays (``scored``): the best ``keep`` of their sums."""
    import numpy as np

    return merge_arrays(np, parts, keep)


def merge_loop(
    scores: dict[int, float], common: Sequence[dict[int, float]], keep: int
) -> dict[int, float]:
    total = dict(scores)
    get = total.get
    for postings in common:
        for seq, x in postings.items():
            total[seq] = get(seq, 0.0) + x
    best = sorted(total, key=total.__getitem__, reverse=True)[:keep]
    return {seq: total[seq] for seq in best}


def merge_numpy(
    np: Any, scores: dict[int, float], common: Sequence[dict[int, float]], keep: int
) -> dict[int, float]:
    n = len(scores)
    first = (np.fromiter(scores.keys(), np.int64, n), np.fromiter(scores.values(), np.float64, n))
    return merge_arrays(np, [first, *(_arrays(np, p) for p in common)], keep)


def merge_arrays(np: Any, parts: Sequence[tuple[Any, Any]], keep: int) -> dict[int, float]:
    """The lists given as (seqs, scores) arrays, summed per lesson: the best ``keep``, ties by
    first appearance (as ``merge_loop`` over the same lists as dictionaries)."""
    if not parts:
        return {}
    seqs = np.concatenate([a for a, _ in parts])
    vals = np.concatenate([b for _, b in parts])
    uniq, first, inverse = np.unique(seqs, return_index=True, return_inverse=True)
    sums = np.bincount(inverse, weights=vals)  # in input order, as the loop adds them
    cand = np.arange(len(sums))
    if len(sums) > keep > 0:
        kth = np.partition(sums, len(sums) - keep)[len(sums) - keep]
        cand = np.nonzero(sums >= kth)[0]  # the best ``keep`` and any tied with the last
    best = cand[np.lexsort((first[cand], -sums[cand]))][:keep]
    return {int(uniq[i]): float(sums[i]) for i in best}
