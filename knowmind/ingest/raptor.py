"""RAPTOR trees (Sarthi et al., 2024): cluster a document's chunk embeddings, summarise each
cluster, embed the summaries, and repeat on the summaries — up to ``MAX_LEVELS`` levels or until
a level is one node.

Clustering is spherical k-means on the unit embeddings with about ``CLUSTER_SIZE`` members per
cluster (the paper's UMAP + Gaussian mixture needs far more points than a document has; k-means
keeps the tree deterministic: seeded, farthest-point initialisation). The summariser and the
embedder are passed in, so this module does no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CLUSTER_SIZE", "MAX_LEVELS", "TreeNode", "build_tree", "cluster"]

MAX_LEVELS = 3
CLUSTER_SIZE = 5  # members per cluster: what a small model can summarise in one prompt
KMEANS_ROUNDS = 20

Summarise = Callable[[Sequence[str]], Awaitable[str]]
Embed = Callable[[Sequence[str]], Awaitable[np.ndarray]]


@dataclass(frozen=True, slots=True)
class TreeNode:
    level: int
    content: str
    children: int
    embedding: np.ndarray


def cluster(embeddings: np.ndarray, size: int = CLUSTER_SIZE) -> list[list[int]]:
    """Groups of row indices (each non-empty, every row once), about ``size`` rows a group."""
    n = len(embeddings)
    k = max(1, math.ceil(n / size))
    if k == 1:
        return [list(range(n))]
    unit = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-12)
    centres = _farthest_points(unit, k)
    labels = np.zeros(n, dtype=np.int64)
    for _ in range(KMEANS_ROUNDS):
        labels = np.argmax(unit @ centres.T, axis=1)
        members = [labels == c for c in range(k)]
        moved = np.stack(
            [unit[m].mean(axis=0) if m.any() else centres[c] for c, m in enumerate(members)]
        )
        moved /= np.maximum(np.linalg.norm(moved, axis=1, keepdims=True), 1e-12)
        if np.allclose(moved, centres):
            break
        centres = moved
    groups = [np.flatnonzero(labels == c).tolist() for c in range(k)]
    return [g for g in groups if g]


def _farthest_points(unit: np.ndarray, k: int) -> np.ndarray:
    """k starting centres: the first row, then each time the row least similar to those chosen."""
    chosen = [0]
    nearest = unit @ unit[0]
    for _ in range(1, k):
        index = int(np.argmin(nearest))
        chosen.append(index)
        nearest = np.maximum(nearest, unit @ unit[index])
    return unit[chosen].copy()


async def build_tree(
    contents: Sequence[str],
    embeddings: np.ndarray,
    summarise: Summarise,
    embed: Embed,
    *,
    max_levels: int = MAX_LEVELS,
    size: int = CLUSTER_SIZE,
) -> list[TreeNode]:
    """Every summary node, level 1 (of the chunks) upwards. A level of one node is the root."""
    nodes: list[TreeNode] = []
    texts, vectors = list(contents), embeddings
    for level in range(1, max_levels + 1):
        groups = cluster(vectors, size)
        summaries = [await summarise([texts[i] for i in group]) for group in groups]
        summary_vectors = await embed(summaries)
        nodes += [
            TreeNode(level, text, len(group), vector)
            for text, group, vector in zip(summaries, groups, summary_vectors, strict=True)
        ]
        if len(groups) == 1:
            break
        texts, vectors = summaries, summary_vectors
    return nodes
