"""Subgraph reads from the PostgreSQL graph: breadth-first, one indexed query per hop."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from knowmind.db.engine import Database
from knowmind.graph.base import PPRRun, Subgraph, rank_by_power_iteration
from knowmind.store.edges import neighbour_links

__all__ = ["PostgresGraphReader"]


class PostgresGraphReader:
    name = "postgres"

    def __init__(self, db: Database) -> None:
        self.db = db

    async def subgraph(
        self, tenant_id: UUID, seeds: Sequence[UUID], hops: int, max_nodes: int = 5000
    ) -> Subgraph:
        graph = Subgraph()
        seen = set(seeds)
        frontier = list(seeds)
        async with self.db.tenant_tx(tenant_id) as conn:
            for _ in range(hops):
                if not frontier:
                    break
                next_frontier = []
                for a, a_kind, b, b_kind, weight in await neighbour_links(
                    conn, tenant_id, frontier
                ):
                    graph.add(a, a_kind, b, b_kind, weight)
                    for node in (a, b):
                        if node not in seen and len(seen) < max_nodes:
                            seen.add(node)
                            next_frontier.append(node)
                frontier = next_frontier
        # links found while expanding the last hop may point beyond it: keep only reached nodes
        graph.links = {k: w for k, w in graph.links.items() if k[0] in seen and k[1] in seen}
        return graph

    async def personalized_pagerank(
        self,
        tenant_id: UUID,
        seeds: Mapping[UUID, float],
        hops: int,
        damping: float,
        max_iterations: int,
    ) -> PPRRun:
        return await rank_by_power_iteration(self, tenant_id, seeds, hops, damping, max_iterations)
