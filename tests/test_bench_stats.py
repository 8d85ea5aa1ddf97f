"""Benchmark rigour: the fixed dev/test split, the paired test, the typo set, the fit."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from benchmark.datasets import with_typo
from benchmark.stats import paired_test, split_of


def damerau(a: str, b: str) -> int:
    """Optimal string alignment distance (an independent check of the typo generator)."""
    d = [[i + j if i * j == 0 else 0 for j in range(len(b) + 1)] for i in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            d[i][j] = min(
                d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])
            )
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def test_split_is_fixed_about_one_third_dev_and_typo_sets_split_like_their_base():
    ids = [f"q{i}" for i in range(3000)]
    parts = Counter(split_of("xquad-de", q) for q in ids)
    assert 900 < parts["dev"] < 1100 and parts["dev"] + parts["test"] == 3000
    assert [split_of("xquad-de", q) for q in ids] == [split_of("xquad-de", q) for q in ids]
    assert all(split_of("xquad-de-typo", q) == split_of("xquad-de", q) for q in ids)
    assert [split_of("musique", q) for q in ids] != [split_of("xquad-de", q) for q in ids]


def test_paired_test_separates_a_real_difference_from_none():
    rng = np.random.default_rng(1)
    base = {f"q{i}": float(v) for i, v in enumerate(rng.random(60))}
    same = paired_test(base, base, rounds=2000)
    assert same["p_value"] == 1.0 and same["ties"] == 60 and same["diff"] == 0
    better = {q: min(1.0, v + 0.2) for q, v in base.items()}
    result = paired_test(better, base, rounds=2000)
    assert result["p_value"] < 0.01 and result["diff"] > 0.1
    assert result["wins"] + result["ties"] == 60 and result["losses"] == 0
    noisy = {q: v + (0.05 if i % 2 else -0.05) for i, (q, v) in enumerate(base.items())}
    assert paired_test(noisy, base, rounds=2000)["p_value"] > 0.5  # symmetric noise


@pytest.mark.parametrize(
    "question",
    [
        "Wie viele Punkte gab die Verteidigung der Panthers ab?",
        "Which NFL team represented the AFC at Super Bowl 50?",
        "Wer ist es?",
    ],
)
def test_typo_is_one_edit_in_the_longest_content_word(question):
    changed = with_typo("id-1", question)
    assert changed == with_typo("id-1", question)  # seeded by the query id
    before, after = question.split(), changed.split()
    assert len(before) == len(after)
    diffs = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert len(diffs) == 1 and damerau(*diffs[0]) == 1
    longest = max(len(w.strip("?")) for w in before)
    assert len(diffs[0][0].strip("?")) == longest


def test_typos_vary_with_the_query_id():
    question = "Wie viele Punkte gab die Verteidigung der Panthers ab?"
    assert len({with_typo(f"id-{i}", question) for i in range(30)}) > 10


def test_significance_compares_knowmind_with_vector_and_the_best_peer_per_split():
    from benchmark.runner import SystemResult, significance

    ids = [f"q{i}" for i in range(30)]

    def system(name: str, score) -> SystemResult:
        return SystemResult(name, {}, {}, {q: {"ndcg@10": score(i)} for i, q in enumerate(ids)})

    results = {
        "knowmind": system("knowmind", lambda i: 0.9),
        "vector": system("vector", lambda i: 0.8 if i % 3 else 0.9),
        "txtai-bb25": system("txtai-bb25", lambda i: 0.5),
        "lancedb-hybrid": system("lancedb-hybrid", lambda i: 0.7),
    }
    out = significance("xquad-de", results)
    assert out["metric"] == "ndcg@10" and out["best_peer"]["system"] == "lancedb-hybrid"
    dev, test = out["vector"]["dev"], out["vector"]["test"]
    assert dev["queries"] + test["queries"] == 30
    assert dev["ties"] + test["ties"] == 10 and dev["losses"] + test["losses"] == 0
    assert out["best_peer"]["test"]["wins"] == test["queries"]
