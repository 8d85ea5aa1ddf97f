"""The read interface both graph backends implement for the recall graph stage."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from knowmind.graph.ppr import ppr_over_edges

__all__ = [
    "GraphReader",
    "Link",
    "PPRRun",
    "Subgraph",
    "breadth_first",
    "rank_by_power_iteration",
]

Link = tuple[UUID, str, UUID, str, float]  # (a, a kind, b, b kind, weight)


@dataclass(slots=True)
class Subgraph:
    """Undirected weighted links within some hops of the seeds, and which nodes are memories."""

    links: dict[tuple[UUID, UUID], float] = field(default_factory=dict)
    memories: set[UUID] = field(default_factory=set)

    def add(self, a: UUID, a_kind: str, b: UUID, b_kind: str, weight: float) -> None:
        key = (a, b) if str(a) < str(b) else (b, a)
        self.links[key] = max(weight, self.links.get(key, 0.0))
        for node, kind in ((a, a_kind), (b, b_kind)):
            if kind == "memory":
                self.memories.add(node)

    def edges(self) -> list[tuple[UUID, UUID, float]]:
        return [(a, b, w) for (a, b), w in self.links.items()]


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
    ) -> Subgraph:
        """Links among nodes within ``hops`` of the seeds (typed edges and mentions alike)."""
        ...

    async def personalized_pagerank(
        self,
        tenant_id: UUID,
        seeds: Mapping[UUID, float],
        hops: int,
        damping: float,
        max_iterations: int,
    ) -> PPRRun: ...


async def rank_by_power_iteration(
    reader: GraphReader,
    tenant_id: UUID,
    seeds: Mapping[UUID, float],
    hops: int,
    damping: float,
    max_iterations: int,
    *,
    max_nodes: int = 5000,
) -> PPRRun:
    """Fetch the k-hop subgraph and run PPR here: the same numbers whatever the backend."""
    graph = await reader.subgraph(tenant_id, list(seeds), hops, max_nodes)
    result = ppr_over_edges(graph.edges(), seeds, damping=damping, max_iterations=max_iterations)
    return PPRRun(result.scores, graph.memories, result.iterations, "power-iteration")


async def breadth_first(
    seeds: Sequence[UUID],
    hops: int,
    max_nodes: int,
    links_of: Callable[[list[UUID]], Awaitable[list[Link]]],
) -> Subgraph:
    """Expand hop by hop from the seeds; ``links_of(frontier)`` returns every link touching
    the frontier. At most ``max_nodes`` nodes are reached."""
    graph = Subgraph()
    seen = set(seeds)
    frontier = list(seeds)
    for _ in range(hops):
        if not frontier:
            break
        next_frontier = []
        for a, a_kind, b, b_kind, weight in await links_of(frontier):
            graph.add(a, a_kind, b, b_kind, weight)
            for node in (a, b):
                if node not in seen and len(seen) < max_nodes:
                    seen.add(node)
                    next_frontier.append(node)
        frontier = next_frontier
    # links found while expanding the last hop may point beyond it: keep only reached nodes
    graph.links = {k: w for k, w in graph.links.items() if k[0] in seen and k[1] in seen}
    graph.memories &= seen
    return graph
