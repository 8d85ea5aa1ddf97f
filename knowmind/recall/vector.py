"""Vector stage: cosine nearest neighbours of the query embedding in pgvector's HNSW index."""

from __future__ import annotations

from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.store.search import vector_candidates

__all__ = ["VectorStage"]


class VectorStage:
    name = "vector"

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        embedding = await ctx.query_embedding()
        async with ctx.db.tenant_tx(query.tenant) as conn:
            rows = await vector_candidates(
                conn, query.tenant, embedding, query.filters, query.candidates
            )
        return [Candidate(chunk_id, memory_id, score) for chunk_id, memory_id, score in rows]
