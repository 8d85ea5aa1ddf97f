"""Fusion of the stages' rankings.

- Reciprocal Rank Fusion: score(d) = Σ_stage weight_stage / (k + rank_stage(d)), ranks from 1.
- Convex score fusion: score(d) = Σ_stage α_stage · norm_stage(d), each stage's scores min-max
  normalised over its own list (0 where the stage did not find d), α the weights summed to 1.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["FUSION_METHODS", "Fused", "convex_fusion", "dedupe", "reciprocal_rank_fusion"]

K = TypeVar("K", bound=Hashable)

DEFAULT_K = 60
# "rrf": Reciprocal Rank Fusion with fixed weights; "convex": normalised scores, same weights.
FUSION_METHODS = ("rrf", "convex")


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


def convex_fusion(
    scored: Mapping[str, Sequence[tuple[K, float]]],
    weights: Mapping[str, float] | None = None,
) -> list[Fused[K]]:
    """Fuse best-first (key, score) lists by a convex combination of min-max normalised scores
    (a one-item list normalises to 1). Weights are scaled to sum to 1 over the given stages."""
    raw = {s: (1.0 if weights is None else max(0.0, weights.get(s, 1.0))) for s in scored}
    total = sum(raw.values()) or 1.0
    fused: dict[K, Fused[K]] = {}
    for stage, items in scored.items():
        if not items:
            continue
        values = [score for _, score in items]
        low, high = min(values), max(values)
        for rank, (key, score) in enumerate(items, start=1):
            norm = 1.0 if high == low else (score - low) / (high - low)
            entry = fused.setdefault(key, Fused(key))
            entry.score += raw[stage] / total * norm
            entry.ranks[stage] = rank
    return sorted(fused.values(), key=lambda f: -f.score)


def dedupe(keys: Sequence[K]) -> list[K]:
    """Keep the first (best) occurrence of each key."""
    return list(dict.fromkeys(keys))
