"""Subgraph reads from the PostgreSQL graph: breadth-first, one indexed query per hop, within a
budget (nodes reached, links per node and per hop) so a hub cannot blow up the recall."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from uuid import UUID

from knowmind.db.engine import Database
from knowmind.graph.base import Link, PPRRun, Subgraph, breadth_first, rank_by_power_iteration
from knowmind.store.edges import neighbour_links

__all__ = ["PostgresGraphReader"]


class PostgresGraphReader:
    name = "postgres"

    def __init__(
        self,
        db: Database,
        *,
        max_nodes: int = 800,
        links_per_node: int = 40,
        links_per_hop: int = 2000,
    ) -> None:
        self.db = db
        self.max_nodes = max_nodes
        self.links_per_node = links_per_node
        self.links_per_hop = links_per_hop

    async def subgraph(
        self, tenant_id: UUID, seeds: Sequence[UUID], hops: int, max_nodes: int = 5000
    ) -> Subgraph:
        async with self.db.tenant_tx(tenant_id) as conn:

            async def links_of(frontier: list[UUID]) -> list[Link]:
                return await neighbour_links(
                    conn,
                    tenant_id,
                    frontier,
                    per_node=self.links_per_node,
                    max_links=self.links_per_hop,
                )

            return await breadth_first(seeds, hops, max_nodes, links_of)

    async def personalized_pagerank(
        self,
        tenant_id: UUID,
        seeds: Mapping[UUID, float],
        hops: int,
        damping: float,
        max_iterations: int,
    ) -> PPRRun:
        return await rank_by_power_iteration(
            self, tenant_id, seeds, hops, damping, max_iterations, max_nodes=self.max_nodes
        )
