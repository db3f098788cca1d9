"""Summing the frequent terms' postings: numpy and the plain loop agree exactly."""

from __future__ import annotations

import random

import numpy as np
import pytest

from tenantry.memory import postings


def lists(
    seed: int, terms: int, size: int, span: int
) -> tuple[dict[int, float], list[dict[int, float]]]:
    rng = random.Random(seed)
    # scores from a few values, so that many lessons tie (BM25 does that for equal tf and length)
    values = [round(rng.uniform(0.5, 6.0), 2) for _ in range(7)]
    rare = {rng.randrange(span): rng.choice(values) for _ in range(60)}
    common = [{rng.randrange(span): rng.choice(values) for _ in range(size)} for _ in range(terms)]
    return rare, common


@pytest.mark.parametrize(
    ("seed", "terms", "size", "span"),
    [(1, 14, 400, 100_000), (2, 16, 400, 3_000), (3, 3, 400, 500), (4, 1, 50, 80)],
)
def test_numpy_and_the_loop_keep_the_same_lessons_in_the_same_order(
    seed: int, terms: int, size: int, span: int
) -> None:
    rare, common = lists(seed, terms, size, span)
    for keep in (1, 25, 60, 10_000):
        loop = postings.merge_loop(rare, common, keep)
        vec = postings.merge_numpy(np, rare, common, keep)
        assert list(loop.items()) == list(vec.items())
        assert postings.merge(rare, common, keep) == loop


def test_a_list_changed_in_place_is_converted_again() -> None:
    rare, common = lists(5, 4, 400, 2_000)
    before = postings.merge_numpy(np, rare, common, 30)
    common[0].update({10**9: 100.0})
    after = postings.merge_numpy(np, rare, common, 30)
    assert 10**9 in after and 10**9 not in before


@pytest.mark.parametrize(("seed", "terms", "size", "span"), [(6, 5, 300, 2_000), (7, 1, 80, 90)])
def test_lists_kept_as_arrays_merge_as_the_dictionaries_do(
    seed: int, terms: int, size: int, span: int
) -> None:
    rare, common = lists(seed, terms, size, span)
    parts = [rare, *common]
    arrays = [(np.array(list(p), np.int64), np.array(list(p.values()))) for p in parts]
    for keep in (1, 25, 60, 10_000):
        assert list(postings.merge_lists(arrays, keep).items()) == list(
            postings.merge_loop({}, parts, keep).items()
        )
    assert postings.merge_lists([], 60) == {}
