"""Benchmark rigour: a fixed dev/test split of the queries, and paired significance tests.

The split is by a hash of the dataset and query id, so it never changes between runs or
machines: about a third of every dataset's queries is ``dev`` (where fusion is calibrated), the
rest ``test`` (where results are reported).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from statistics import mean
from typing import Any

import numpy as np

__all__ = ["DEV_SHARE", "paired_test", "primary_metric", "split_metrics", "split_of"]

DEV_SHARE = 3  # one query in three is dev
ROUNDS = 20_000
SEED = 20261203


# LoCoMo splits by conversation (its questions are about one conversation each): the shared
# file's conversations 2-5 are dev, 6-9 test.
LOCOMO_DEV_CONVERSATIONS = frozenset({"c2", "c3", "c4", "c5"})


def split_of(dataset: str, query_id: str) -> str:
    """ "dev" or "test", fixed by sha1("<dataset>:<query id>"); a typo set splits like the
    set it was derived from; LoCoMo by conversation."""
    base = dataset.removesuffix("-typo")
    if base.startswith("locomo"):
        conversation = query_id.split(":", 1)[0]
        return "dev" if conversation in LOCOMO_DEV_CONVERSATIONS else "test"
    digest = hashlib.sha1(f"{base}:{query_id}".encode()).hexdigest()
    return "dev" if int(digest[:8], 16) % DEV_SHARE == 0 else "test"


def primary_metric(dataset: str) -> str:
    """MuSiQue and LoCoMo ask for every gold passage or evidence turn: recall@5; the relation
    corpus for the memory that states the answer: hits@3; the rest nDCG@10."""
    if dataset.startswith(("musique", "locomo")):
        return "recall@5"
    return "hits@3" if dataset == "relations" else "ndcg@10"


def paired_test(
    a: Mapping[str, float], b: Mapping[str, float], rounds: int = ROUNDS, seed: int = SEED
) -> dict[str, Any]:
    """Two-sided paired randomisation (sign-flip) test of mean(a - b) over the queries both
    systems answered; with the per-query win/loss/tie count of a against b."""
    ids = sorted(set(a) & set(b))
    if not ids:
        return {"queries": 0}
    diffs = np.array([a[q] - b[q] for q in ids], dtype=np.float64)
    observed = abs(diffs.mean())
    signs = np.random.default_rng(seed).choice((-1.0, 1.0), size=(rounds, len(ids)))
    extreme = int((np.abs((signs * diffs).mean(axis=1)) >= observed - 1e-12).sum())
    return {
        "queries": len(ids),
        "mean_a": round(mean(a[q] for q in ids), 4),
        "mean_b": round(mean(b[q] for q in ids), 4),
        "diff": round(float(diffs.mean()), 4),
        "p_value": round((extreme + 1) / (rounds + 1), 4),
        "wins": int((diffs > 1e-9).sum()),
        "losses": int((diffs < -1e-9).sum()),
        "ties": int((np.abs(diffs) <= 1e-9).sum()),
        "rounds": rounds,
    }


def split_metrics(
    dataset: str, per_query: Mapping[str, Mapping[str, Any]], metrics: Sequence[str]
) -> dict[str, dict[str, float]]:
    """Mean of each metric over the dev and the test queries."""
    out: dict[str, dict[str, float]] = {}
    for part in ("dev", "test"):
        rows = [r for q, r in per_query.items() if split_of(dataset, q) == part]
        out[part] = {m: round(mean(r[m] for r in rows), 4) for m in metrics} if rows else {}
        out[part]["queries"] = len(rows)
    return out
