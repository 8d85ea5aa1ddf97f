"""Vector stage: cosine nearest neighbours of the query embedding, exact for a small tenant and
through pgvector's HNSW index for a large one: the tenant's own index when it has a valid one,
else the global index (``store.vector_search`` decides per query; explain reports the path)."""

from __future__ import annotations

from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.store.vector_search import (
    DEFAULT_EF_SEARCH,
    DEFAULT_EXACT_MAX_ROWS,
    choose_vector_path,
    vector_candidates,
)

__all__ = ["VectorStage", "vector_signals"]


class VectorStage:
    name = "vector"

    def __init__(
        self, exact_max_rows: int = DEFAULT_EXACT_MAX_ROWS, ef_search: int = DEFAULT_EF_SEARCH
    ) -> None:
        self.exact_max_rows = exact_max_rows
        self.ef_search = ef_search

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        embedding = await ctx.query_embedding()
        async with ctx.db.read(query.tenant) as conn:
            path = await choose_vector_path(conn, query.tenant, self.exact_max_rows)
            rows = await vector_candidates(
                conn,
                query.tenant,
                embedding,
                query.filters,
                query.candidates,
                path=path,
                ef_search=self.ef_search,
            )
        if query.explain:
            ctx.explain["vector_path"] = path
        nearest_per_memory: dict[object, float] = {}
        for _, memory_id, score in rows:
            nearest_per_memory.setdefault(memory_id, score)
        ctx.signals["vector"] = vector_signals(list(nearest_per_memory.values()))
        return [Candidate(chunk_id, memory_id, score) for chunk_id, memory_id, score in rows]


def vector_signals(similarities: list[float]) -> dict[str, float]:
    """top1: cosine similarity of the nearest memory; margin: its lead over the next memory."""
    if not similarities:
        return {"top1": 0.0, "margin": 0.0}
    second = similarities[1] if len(similarities) > 1 else 0.0
    return {"top1": similarities[0], "margin": similarities[0] - second}
