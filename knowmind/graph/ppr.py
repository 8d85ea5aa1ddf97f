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
    entries = sparse.coo_matrix(adjacency, dtype=np.float64)
    return _power_iteration(
        entries.row,
        entries.col,
        entries.data,
        entries.shape[0],
        reset,
        damping,
        tolerance,
        max_iterations,
    )


def _power_iteration(
    rows: np.ndarray,
    cols: np.ndarray,
    weights: np.ndarray,
    n: int,
    reset: np.ndarray,
    damping: float,
    tolerance: float,
    max_iterations: int,
) -> tuple[np.ndarray, int]:
    """Power iteration over the adjacency's entries (row, column, weight; repeats add up).
    A subgraph has a few hundred nodes: one ``bincount`` per iteration beats building and
    multiplying a sparse matrix, whose per-call overhead is most of the time at that size."""
    if n == 0:
        return np.zeros(0), 0
    total = float(reset.sum())
    if total <= 0:
        raise ValueError("the reset vector needs positive mass")
    r = reset.astype(np.float64) / total
    out_weight = np.bincount(cols, weights=weights, minlength=n)  # column sums
    dangling = out_weight == 0
    inverse = np.divide(1.0, out_weight, out=np.zeros(n), where=~dangling)
    transition = weights * inverse[cols]  # entry (i, j) spreads that share of node j's mass
    scores = r.copy()
    for iteration in range(1, max_iterations + 1):
        # (not in place: bincount of no entries is an integer array)
        spread = np.bincount(rows, weights=transition * scores[cols], minlength=n)
        spread = spread + scores[dangling].sum() * r
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
    reset = np.zeros(n)
    for seed, weight in seeds.items():
        reset[index[seed]] += weight
    scores, iterations = _power_iteration(
        rows,
        cols,
        np.array(weights * 2, dtype=np.float64),
        n,
        reset,
        damping,
        tolerance,
        max_iterations,
    )
    return PPRResult(dict(zip(index, scores.tolist(), strict=True)), iterations)
