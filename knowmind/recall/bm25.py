"""Full-text stage: PostgreSQL full text in the tenant's language, ranked by ``ts_rank_cd``.

Called "bm25" in the API for the role it plays; the ranking is PostgreSQL's cover density.
"""

from __future__ import annotations

from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.store.search import fulltext_candidates

__all__ = ["FullTextStage"]


class FullTextStage:
    name = "bm25"

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        async with ctx.db.tenant_tx(query.tenant) as conn:
            rows = await fulltext_candidates(
                conn,
                query.tenant,
                query.language,
                query.text,
                query.filters,
                query.candidates,
            )
        return [Candidate(chunk_id, memory_id, score) for chunk_id, memory_id, score in rows]
