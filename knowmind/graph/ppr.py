"""Personalized PageRank as a pure function, fed by either graph backend.

``scores = (1 - d) · r + d · P · scores`` with ``P`` the column-stochastic transition matrix of
the (undirected, weighted) subgraph and ``r`` the normalised reset (personalisation) vector.
The mass of dangling nodes (no edges) returns to the reset vector, so scores always sum to 1.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
from scipy import sparse

__all__ = ["PPRResult", "personalized_pagerank", "ppr_over_edges"]

N = TypeVar("N", bound=Hashable)


def personalized_pagerank(
    adjacency: sparse.spmatrix | np.ndarray,
    reset: np.ndarray,
    damping: float = 0.85,
    tolerance: float = 1e-6,
    max_iterations: int = 20,
) -> tuple[np.ndarray, int]:
    """Power iteration on a symmetric weighted adjacency matrix. Returns (scores, iterations)."""
    matrix = sparse.csr_matrix(adjacency, dtype=np.float64)
    n = matrix.shape[0]
    if n == 0:
        return np.zeros(0), 0
    total = float(reset.sum())
    if total <= 0:
        raise ValueError("the reset vector needs positive mass")
    r = reset.astype(np.float64) / total
    out_weight = np.asarray(matrix.sum(axis=0)).ravel()  # column sums
    dangling = out_weight == 0
    inverse = np.divide(1.0, out_weight, out=np.zeros(n), where=~dangling)
    transition = matrix @ sparse.diags(inverse)  # column j spreads node j's mass
    scores = r.copy()
    for iteration in range(1, max_iterations + 1):
        spread = transition @ scores + scores[dangling].sum() * r
        updated = (1 - damping) * r + damping * spread
        delta = float(np.abs(updated - scores).sum())
        scores = updated
        if delta < tolerance:
            return scores, iteration
    return scores, max_iterations


@dataclass(frozen=True, slots=True)
class PPRResult(Generic[N]):
    scores: dict[N, float]
    iterations: int


def ppr_over_edges(
    edges: Iterable[tuple[N, N, float]],
    seeds: Mapping[N, float],
    damping: float = 0.85,
    tolerance: float = 1e-6,
    max_iterations: int = 20,
) -> PPRResult[N]:
    """PPR over an edge list (treated as undirected) with seed weights as the reset vector."""
    index: dict[N, int] = {}
    position = index.setdefault
    a_side: list[int] = []
    b_side: list[int] = []
    weights: list[float] = []
    for a, b, weight in edges:
        if a == b:
            continue
        a_side.append(position(a, len(index)))
        b_side.append(position(b, len(index)))
        weights.append(weight)
    for seed in seeds:
        position(seed, len(index))
    n = len(index)
    rows = np.array(a_side + b_side, dtype=np.int64)
    cols = np.array(b_side + a_side, dtype=np.int64)
    adjacency = sparse.csr_matrix((np.array(weights * 2, dtype=np.float64), (rows, cols)), (n, n))
    reset = np.zeros(n)
    for seed, weight in seeds.items():
        reset[index[seed]] += weight
    scores, iterations = personalized_pagerank(adjacency, reset, damping, tolerance, max_iterations)
    return PPRResult(dict(zip(index, scores.tolist(), strict=True)), iterations)
