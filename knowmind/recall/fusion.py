"""Reciprocal Rank Fusion: score(d) = Σ_stage weight_stage / (k + rank_stage(d)), ranks from 1."""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Fused", "dedupe", "reciprocal_rank_fusion"]

K = TypeVar("K", bound=Hashable)

DEFAULT_K = 60


@dataclass(slots=True)
class Fused(Generic[K]):
    key: K
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[K]],
    k: int = DEFAULT_K,
    weights: Mapping[str, float] | None = None,
) -> list[Fused[K]]:
    """Fuse best-first rankings (each key at most once per ranking). Ties keep the order in
    which keys were first seen, so the result is deterministic."""
    fused: dict[K, Fused[K]] = {}
    for stage, ranking in rankings.items():
        weight = 1.0 if weights is None else weights.get(stage, 1.0)
        for rank, key in enumerate(ranking, start=1):
            entry = fused.setdefault(key, Fused(key))
            entry.score += weight / (k + rank)
            entry.ranks[stage] = rank
    return sorted(fused.values(), key=lambda f: -f.score)


def dedupe(keys: Sequence[K]) -> list[K]:
    """Keep the first (best) occurrence of each key."""
    return list(dict.fromkeys(keys))
