"""Retrieval metrics per query and aggregated: recall@k, nDCG@10 (graded), MRR@10."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import mean

__all__ = ["aggregate", "hits_at_k", "ndcg_at_k", "per_query", "recall_at_k", "reciprocal_rank"]


def recall_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """Share of all relevant documents found in the top k (multi-hop: every gold paragraph)."""
    gold = {d for d, grade in relevant.items() if grade > 0}
    return len(gold & set(ranking[:k])) / len(gold) if gold else 0.0


def ndcg_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    """Graded nDCG with gain 2^grade - 1 and log2 discounts."""
    dcg = sum((2 ** relevant.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranking[:k]))
    ideal = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def reciprocal_rank(ranking: Sequence[str], relevant: Mapping[str, int], k: int = 10) -> float:
    for i, doc in enumerate(ranking[:k]):
        if relevant.get(doc, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


def hits_at_k(ranking: Sequence[str], relevant: Mapping[str, int], k: int) -> float:
    """1 when a document of the highest grade (the one that answers) is in the top k."""
    top = max(relevant.values(), default=0)
    return float(top > 0 and any(relevant.get(d, 0) == top for d in ranking[:k]))


def per_query(ranking: Sequence[str], relevant: Mapping[str, int]) -> dict[str, float]:
    return {
        "hits@1": hits_at_k(ranking, relevant, 1),
        "hits@3": hits_at_k(ranking, relevant, 3),
        "recall@1": recall_at_k(ranking, relevant, 1),
        "recall@5": recall_at_k(ranking, relevant, 5),
        "recall@10": recall_at_k(ranking, relevant, 10),
        "ndcg@10": ndcg_at_k(ranking, relevant, 10),
        "mrr@10": reciprocal_rank(ranking, relevant, 10),
    }


def aggregate(rows: Sequence[Mapping[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    return {key: round(mean(row[key] for row in rows), 4) for key in rows[0]}
