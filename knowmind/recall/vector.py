"""Vector stage: cosine nearest neighbours of the query embedding in pgvector's HNSW index."""

from __future__ import annotations

from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.store.search import vector_candidates

__all__ = ["VectorStage", "vector_signals"]


class VectorStage:
    name = "vector"

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        embedding = await ctx.query_embedding()
        async with ctx.db.tenant_tx(query.tenant) as conn:
            rows = await vector_candidates(
                conn, query.tenant, embedding, query.filters, query.candidates
            )
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
