"""The read interface both graph backends implement for the recall graph stage."""

from __future__ import annotations

import heapq
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar
from uuid import UUID

from knowmind.graph.ppr import ppr_over_edges

__all__ = [
    "MAX_FRONTIER",
    "GraphReader",
    "Link",
    "PPRRun",
    "Subgraph",
    "Walk",
    "breadth_first",
    "power_iteration_run",
    "rank_by_power_iteration",
]

Link = tuple[UUID, str, UUID, str, float]  # (a, a kind, b, b kind, weight)
# A node's key while a subgraph is built: its UUID, or (faster to hash and compare, as the
# PostgreSQL reader sends them) its text.
K = TypeVar("K", UUID, str)
_METHOD = "power-iteration"
# Best-scored nodes a PPR run reports beyond the memories and seeds (explain shows them).
EXPLAINED_NODES = 10
# Nodes expanded per hop after the first: the most strongly tied to the last hop.
MAX_FRONTIER = 60


@dataclass(slots=True)
class Subgraph(Generic[K]):
    """Undirected weighted links within some hops of the seeds, and which nodes are memories."""

    links: dict[tuple[K, K], float] = field(default_factory=dict)
    memories: set[K] = field(default_factory=set)

    def edges(self) -> list[tuple[K, K, float]]:
        return [(a, b, w) for (a, b), w in self.links.items()]

    def keyed_by(self, node_id: Callable[[K], UUID]) -> Subgraph[UUID]:
        return Subgraph(
            {(node_id(a), node_id(b)): w for (a, b), w in self.links.items()},
            {node_id(m) for m in self.memories},
        )


@dataclass(frozen=True, slots=True)
class Walk:
    """One Personalized PageRank: restarts at the seeds (their reset weights), over the
    tenant's graph within ``hops`` of them."""

    tenant_id: UUID
    seeds: Mapping[UUID, float]
    hops: int
    damping: float = 0.85
    max_iterations: int = 20


@dataclass(frozen=True, slots=True)
class PPRRun:
    scores: dict[UUID, float]
    memories: set[UUID]
    iterations: int
    method: str  # "power-iteration" | "gds"


class GraphReader(Protocol):
    name: str

    async def subgraph(
        self, tenant_id: UUID, seeds: Sequence[UUID], hops: int, max_nodes: int = 5000
    ) -> Subgraph[UUID]:
        """Links among nodes within ``hops`` of the seeds (typed edges and mentions alike)."""
        ...

    async def personalized_pagerank(self, walk: Walk) -> PPRRun: ...


async def rank_by_power_iteration(
    reader: GraphReader, walk: Walk, *, max_nodes: int = 5000
) -> PPRRun:
    """Fetch the k-hop subgraph and run PPR here: the same numbers whatever the backend."""
    graph = await reader.subgraph(walk.tenant_id, list(walk.seeds), walk.hops, max_nodes)
    return power_iteration_run(
        graph, walk.seeds, walk.damping, walk.max_iterations, lambda node: node
    )


def power_iteration_run(
    graph: Subgraph[K],
    seeds: Mapping[K, float],
    damping: float,
    max_iterations: int,
    node_id: Callable[[K], UUID],
) -> PPRRun:
    """PPR over a fetched subgraph; ``node_id`` turns node keys into UUIDs for the result.
    Scores are kept for the memories, the seeds and the ``EXPLAINED_NODES`` best nodes: the
    other entities' scores rank nothing, and turning every node key into a UUID is most of
    the work after the walk."""
    result = ppr_over_edges(graph.edges(), seeds, damping=damping, max_iterations=max_iterations)
    best: list[K] = heapq.nlargest(EXPLAINED_NODES, result.scores, key=result.scores.__getitem__)
    kept = set(graph.memories) | set(seeds) | set(best)
    # in the walk's node order, not the set's: that depends on the process's hash seed
    ids = {node: node_id(node) for node in result.scores if node in kept}
    scores = {ids[node]: result.scores[node] for node in ids}
    return PPRRun(scores, {ids[m] for m in graph.memories if m in ids}, result.iterations, _METHOD)


async def breadth_first(
    seeds: Sequence[K],
    hops: int,
    max_nodes: int,
    links_of: Callable[
        [list[K], Collection[K] | None], Awaitable[list[tuple[K, str, K, str, float]]]
    ],
    max_frontier: int | None = None,
) -> Subgraph[K]:
    """Expand hop by hop from the seeds; ``links_of(frontier, memories)`` returns every link
    touching the frontier. After the first hop every frontier node was reached by a link that
    said its kind, so ``memories`` (the memories found so far; the other frontier nodes are
    entities) lets a reader skip look-ups a kind rules out; for the seeds it is None. At most
    ``max_nodes`` nodes are reached, and each further hop expands only the ``max_frontier``
    nodes most strongly tied to the last one (sum of their links' weights): a walk from the
    seeds hardly reaches past the weakly tied ones, and expanding them is most of a hop's work."""
    graph: Subgraph[K] = Subgraph()
    seen = set(seeds)
    frontier = list(seeds)
    for hop in range(hops):
        if not frontier:
            break
        known = graph.memories if hop else None  # the seeds' kinds are not known
        strength = _expand(graph, await links_of(frontier, known), seen, max_nodes)
        frontier = list(strength)
        if max_frontier is not None and len(frontier) > max_frontier:
            frontier = sorted(frontier, key=lambda n: -strength[n])[:max_frontier]
    # links found while expanding the last hop may point beyond it: keep only reached nodes
    graph.links = {k: w for k, w in graph.links.items() if k[0] in seen and k[1] in seen}
    graph.memories &= seen
    return graph


def _expand(
    graph: Subgraph[K],
    links: list[tuple[K, str, K, str, float]],
    seen: set[K],
    max_nodes: int,
) -> dict[K, float]:
    """Add one hop's links to the graph (a link found twice keeps its higher weight, at least
    0) and returns the nodes first reached in this hop, in the order the links name them, with
    the summed weight of their links; ``seen`` grows by them while it holds fewer than
    ``max_nodes``. One pass, no calls per link: a hop brings hundreds of links, and this loop
    was most of the graph stage's Python time."""
    weights, memories = graph.links, graph.memories
    strength: dict[K, float] = {}
    for a, a_kind, b, b_kind, weight in links:
        key = (a, b) if a < b else (b, a)  # UUIDs order as their text does
        known = weights.get(key)
        if known is None or weight > known:
            weights[key] = weight if weight > 0.0 else 0.0
        if a_kind == "memory":
            memories.add(a)
        if b_kind == "memory":
            memories.add(b)
        if a in strength:
            strength[a] += weight
        elif a not in seen and len(seen) < max_nodes:
            seen.add(a)
            strength[a] = weight
        if b in strength:
            strength[b] += weight
        elif b not in seen and len(seen) < max_nodes:
            seen.add(b)
            strength[b] = weight
    return strength
