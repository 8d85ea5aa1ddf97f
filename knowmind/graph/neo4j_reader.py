"""Graph reads from the Neo4j mirror for the recall graph stage.

With Graph Data Science installed (``gds.version()`` answers) PageRank runs in Neo4j on a Cypher
projection of the k-hop neighbourhood, personalised by weighted source nodes. Without it the
neighbourhood is fetched hop by hop (in small requests, as some Bolt servers reject large ones)
and the power iteration runs here — the same function the PostgreSQL backend uses.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from typing import Any
from uuid import UUID

from neo4j import AsyncDriver, AsyncGraphDatabase

from knowmind.graph.base import (
    MAX_FRONTIER,
    Link,
    PPRRun,
    Subgraph,
    Walk,
    breadth_first,
    rank_by_power_iteration,
)

__all__ = ["Neo4jGraphReader"]

IDS_PER_REQUEST = 40  # 40 uuids ≈ 1.6 KB: well below the 4 KB a FalkorDB request survives

_NEIGHBOURS = (
    "UNWIND $ids AS node_id MATCH (a:Node {id: node_id})-[r]-(b:Node) "
    "WHERE a.tenant = $tenant AND b.tenant = $tenant AND r.tenant = $tenant "
    "RETURN a.id AS a, a.kind AS a_kind, b.id AS b, b.kind AS b_kind, "
    "coalesce(r.confidence, 1.0) AS weight"
)


class Neo4jGraphReader:
    name = "neo4j"

    def __init__(self, url: str, user: str | None = None, password: str | None = None) -> None:
        self._url = url
        self._auth = (user, password or "") if user else None
        self._driver: AsyncDriver | None = None
        self._gds: bool | None = None

    async def driver(self) -> AsyncDriver:
        if self._driver is None:
            self._driver = AsyncGraphDatabase.driver(
                self._url, auth=self._auth, connection_timeout=2
            )
        return self._driver

    async def close(self) -> None:
        if self._driver is not None:
            await self._driver.close()
            self._driver = None

    async def _query(self, cypher: str, **params: Any) -> list[dict[str, Any]]:
        driver = await self.driver()
        records, _, _ = await driver.execute_query(cypher, params, database_=None)
        return [record.data() for record in records]

    async def has_gds(self) -> bool:
        if self._gds is None:
            try:
                await self._query("RETURN gds.version() AS version")
                self._gds = True
            except Exception:
                self._gds = False
        return self._gds

    async def subgraph(
        self, tenant_id: UUID, seeds: Sequence[UUID], hops: int, max_nodes: int = 5000
    ) -> Subgraph[UUID]:
        async def links_of(frontier: list[UUID], _memories: Collection[UUID] | None) -> list[Link]:
            links: list[Link] = []
            for start in range(0, len(frontier), IDS_PER_REQUEST):
                rows = await self._query(
                    _NEIGHBOURS,
                    ids=[str(n) for n in frontier[start : start + IDS_PER_REQUEST]],
                    tenant=str(tenant_id),
                )
                links += [
                    (UUID(r["a"]), r["a_kind"], UUID(r["b"]), r["b_kind"], float(r["weight"]))
                    for r in rows
                ]
            return links

        return await breadth_first(seeds, hops, max_nodes, links_of, MAX_FRONTIER)

    async def personalized_pagerank(self, walk: Walk) -> PPRRun:
        if not await self.has_gds():
            return await rank_by_power_iteration(self, walk)
        graph = await self.subgraph(walk.tenant_id, list(walk.seeds), walk.hops)
        return await self._gds_pagerank(walk, graph)

    async def _gds_pagerank(self, walk: Walk, graph: Subgraph[UUID]) -> PPRRun:
        """PageRank in GDS over exactly the subgraph fetched above (both directions of each
        link, as the power iteration treats the graph as undirected)."""
        name = f"knowmind-ppr-{uuid.uuid4().hex}"
        linked = {str(n) for link in graph.links for n in link}
        nodes = sorted(linked | {str(s) for s in walk.seeds})
        await self._query(
            "CALL gds.graph.project.cypher($name, "
            "'MATCH (n:Node) WHERE n.tenant = $tenant AND n.id IN $ids RETURN id(n) AS id', "
            "'MATCH (a:Node)-[r]-(b:Node) WHERE a.tenant = $tenant AND r.tenant = $tenant "
            "AND a.id IN $ids AND b.id IN $ids "
            "RETURN id(a) AS source, id(b) AS target, coalesce(r.confidence, 1.0) AS weight', "
            "{parameters: {tenant: $tenant, ids: $ids}, validateRelationships: false})",
            name=name,
            tenant=str(walk.tenant_id),
            ids=nodes,
        )
        try:
            rows = await self._query(
                "UNWIND $seeds AS seed MATCH (s:Node {id: seed.id}) WHERE s.tenant = $tenant "
                "WITH collect([s, seed.weight]) AS sources "
                "CALL gds.pageRank.stream($name, {sourceNodes: sources, "
                "dampingFactor: $damping, maxIterations: $iterations, tolerance: 1e-6, "
                "relationshipWeightProperty: 'weight'}) YIELD nodeId, score "
                "RETURN gds.util.asNode(nodeId).id AS id, score",
                name=name,
                tenant=str(walk.tenant_id),
                damping=walk.damping,
                iterations=walk.max_iterations,
                seeds=[{"id": str(s), "weight": w} for s, w in walk.seeds.items()],
            )
        finally:
            await self._query("CALL gds.graph.drop($name, false)", name=name)
        total = sum(r["score"] for r in rows) or 1.0
        scores = {UUID(r["id"]): r["score"] / total for r in rows}
        return PPRRun(scores, graph.memories, walk.max_iterations, "gds")
