"""Subgraph reads from the PostgreSQL graph: breadth-first, one indexed query per hop, within a
budget (nodes reached, links per node and per hop) so a hub cannot blow up the recall."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from uuid import UUID

from knowmind.db.engine import Database
from knowmind.graph.base import (
    MAX_FRONTIER,
    PPRRun,
    Subgraph,
    Walk,
    breadth_first,
    power_iteration_run,
)
from knowmind.store.edges import TextLink, neighbour_links, uuid_from_text

__all__ = ["PostgresGraphReader"]


class PostgresGraphReader:
    name = "postgres"

    def __init__(
        self,
        db: Database,
        *,
        max_nodes: int = 500,  # of a walk's subgraph
        links_per_node: int = 40,  # read from each node and direction
        links_per_hop: int = 1000,  # read per hop in all
        max_frontier: int = MAX_FRONTIER,
    ) -> None:
        self.db = db
        self.max_nodes = max_nodes
        self.max_frontier = max_frontier
        self.links_per_node = links_per_node
        self.links_per_hop = links_per_hop

    async def subgraph(
        self, tenant_id: UUID, seeds: Sequence[UUID], hops: int, max_nodes: int = 5000
    ) -> Subgraph[UUID]:
        graph = await self._subgraph(tenant_id, [str(s) for s in seeds], hops, max_nodes)
        return graph.keyed_by(uuid_from_text)

    async def personalized_pagerank(self, walk: Walk) -> PPRRun:
        by_text = {str(node): weight for node, weight in walk.seeds.items()}
        graph = await self._subgraph(walk.tenant_id, list(by_text), walk.hops, self.max_nodes)
        return power_iteration_run(
            graph, by_text, walk.damping, walk.max_iterations, uuid_from_text
        )

    async def _subgraph(
        self, tenant_id: UUID, seeds: list[str], hops: int, max_nodes: int
    ) -> Subgraph[str]:
        """The subgraph keyed by the nodes' text: thousands of links are hashed and compared
        while it is built, and text does both faster than UUID objects."""
        # the link reads are planned per execution (store.edges.neighbour_links): on a session
        # that plans every statement they need no transaction of their own
        async with self.db.read(tenant_id, custom_plans=True) as conn:

            async def links_of(
                frontier: list[str], memories: Collection[str] | None
            ) -> list[TextLink]:
                return await neighbour_links(
                    conn,
                    tenant_id,
                    frontier,
                    per_node=self.links_per_node,
                    max_links=self.links_per_hop,
                    memories=memories,
                )

            return await breadth_first(seeds, hops, max_nodes, links_of, self.max_frontier)
