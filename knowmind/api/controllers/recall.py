"""Hybrid recall."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK

from knowmind.api.schemas import RecallFilters, RecallHit, RecallIn, RecallOut
from knowmind.recall.pipeline import RecallOptions
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.store.search import MemoryFilters

__all__ = ["RecallController"]


class RecallController(Controller):
    path = "/v1/recall"
    tags = ["recall"]

    @post("/", opt={"scope": "read"}, status_code=HTTP_200_OK)
    async def recall(
        self,
        data: JSONBody[RecallIn],
        runtime: NamedDependency[Runtime],
        principal: NamedDependency[Principal],
    ) -> RecallOut:
        f = data.filters or RecallFilters()
        filters = MemoryFilters(
            memory_type=f.memory_type,
            tags=list(f.tags),
            source=f.source,
            domain=f.domain,
            document_id=f.document_id,
            as_of=data.as_of,
            known_at=data.known_at,
        )
        options = RecallOptions(
            k=data.k,
            stages=data.stages,
            weights=data.weights,
            rerank=data.rerank,
            fusion=data.fusion,
        )
        outcome = await runtime.recall.recall(
            principal, data.query, options, filters, hops=data.hops, explain=data.explain
        )
        hits = [
            RecallHit(
                memory_id=r.chunk.memory_id,
                chunk_id=r.chunk.chunk_id,
                title=r.chunk.title,
                content=r.chunk.content,
                source=r.chunk.source,
                memory_type=r.chunk.memory_type,
                created_at=r.chunk.created_at,
                score=round(r.score, 6),
                stages=r.stages,
                rerank_score=None if r.rerank_score is None else round(r.rerank_score, 6),
            )
            for r in outcome.results
        ]
        return RecallOut(
            results=hits,
            timings_ms=outcome.timings_ms,
            degraded=bool(outcome.degraded_reasons),
            degraded_reasons=outcome.degraded_reasons,
            explain=outcome.explain,
        )
