"""Vector stage: cosine nearest neighbours of the query embedding, exact for a small tenant and
through pgvector's HNSW index for a large one: the tenant's own index when it has a valid one
(its own ``ef_search`` when it is a halfvec one), else the global index
(``store.vector_search`` decides per query; explain reports the path)."""

from __future__ import annotations

import time
from uuid import UUID

from knowmind.db.tenant_scope import user_of
from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.store.search import MemoryFilters
from knowmind.store.sql import Conn
from knowmind.store.vector_search import (
    DEFAULT_EF_SEARCH,
    DEFAULT_EXACT_MAX_ROWS,
    DEFAULT_TENANT_EF_SEARCH,
    VectorPath,
    choose_vector_path,
    path_ef_search,
    vector_candidates,
)

__all__ = ["PATH_TTL_S", "VectorStage", "vector_signals"]

PATH_TTL_S = 10.0
PATHS_KEPT = 10_000  # tenants whose path is remembered (expired ones are pruned beyond)


class VectorStage:
    name = "vector"

    def __init__(
        self,
        exact_max_rows: int = DEFAULT_EXACT_MAX_ROWS,
        ef_search: int = DEFAULT_EF_SEARCH,
        tenant_ef_search: int = DEFAULT_TENANT_EF_SEARCH,
    ) -> None:
        self.exact_max_rows = exact_max_rows
        self.ef_search = ef_search
        self.tenant_ef_search = tenant_ef_search
        # by tenant and end user (a user-bound session counts the rows it sees)
        self._paths: dict[tuple[UUID, str | None], tuple[VectorPath, float]] = {}

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        found = await self.nearest(query, ctx, query.filters)
        nearest_per_memory: dict[object, float] = {}
        for candidate in found:
            nearest_per_memory.setdefault(candidate.memory_id, candidate.score)
        ctx.signals["vector"] = vector_signals(list(nearest_per_memory.values()))
        return found

    async def nearest(
        self, query: RecallRequest, ctx: StageContext, filters: MemoryFilters
    ) -> list[Candidate]:
        """The chunks nearest the question among the memories ``filters`` let through."""
        embedding = await ctx.query_embedding()  # first: no connection held while it queues
        path = self._known_path(query.tenant)
        if path is None:
            async with ctx.db.read(query.tenant) as conn:
                path = await self._look_up_path(conn, query.tenant)
        # an HNSW walk on a session set up for it: no transaction of its own to open
        async with ctx.db.read(query.tenant, nearest=path != "exact") as conn:
            rows = await vector_candidates(
                conn,
                query.tenant,
                embedding,
                filters,
                query.candidates,
                path=path,
                ef_search=path_ef_search(path, self.ef_search, self.tenant_ef_search),
            )
        if query.explain:
            ctx.explain["vector_path"] = path
        return [Candidate(chunk_id, memory_id, score) for chunk_id, memory_id, score in rows]

    def _known_path(self, tenant: UUID) -> VectorPath | None:
        """The tenant's search path if looked up less than ``PATH_TTL_S`` seconds ago: it only
        changes when the tenant crosses ``exact_max_rows`` or gains or loses an index of its
        own, and a stale one still gives the right rows (at worst slower, for those seconds)."""
        known = self._paths.get((tenant, user_of(tenant)))
        return known[0] if known is not None and known[1] > time.monotonic() else None

    async def _look_up_path(self, conn: Conn, tenant: UUID) -> VectorPath:
        now = time.monotonic()
        path = await choose_vector_path(conn, tenant, self.exact_max_rows)
        if len(self._paths) >= PATHS_KEPT:
            self._paths = {t: p for t, p in self._paths.items() if p[1] > now}
        self._paths[(tenant, user_of(tenant))] = (path, now + PATH_TTL_S)
        return path


def vector_signals(similarities: list[float]) -> dict[str, float]:
    """top1: cosine similarity of the nearest memory; margin: its lead over the next memory."""
    if not similarities:
        return {"top1": 0.0, "margin": 0.0}
    second = similarities[1] if len(similarities) > 1 else 0.0
    return {"top1": similarities[0], "margin": similarities[0] - second}
