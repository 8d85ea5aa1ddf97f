"""The read interface both graph backends implement for the recall graph stage."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from knowmind.graph.ppr import ppr_over_edges

__all__ = ["GraphReader", "PPRRun", "Subgraph", "rank_by_power_iteration"]


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
) -> PPRRun:
    """Fetch the k-hop subgraph and run PPR here: the same numbers whatever the backend."""
    graph = await reader.subgraph(tenant_id, list(seeds), hops)
    result = ppr_over_edges(graph.edges(), seeds, damping=damping, max_iterations=max_iterations)
    return PPRRun(result.scores, graph.memories, result.iterations, "power-iteration")
