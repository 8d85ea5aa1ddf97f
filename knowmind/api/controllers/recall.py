"""Hybrid recall."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK

from knowmind.api.outputs import recall_result
from knowmind.api.schemas import RecallIn, memory_filters
from knowmind.contract.responses import RecallHit, RecallOut
from knowmind.recall.base import RecallRequest
from knowmind.services.auth import Principal
from knowmind.services.recall import RecallService

__all__ = ["RecallController"]


class RecallController(Controller):
    path = "/v1/recall"
    tags = ["recall"]

    @post("/", opt={"scope": "read"}, status_code=HTTP_200_OK)
    async def recall(
        self,
        data: JSONBody[RecallIn],
        recall: NamedDependency[RecallService],
        principal: NamedDependency[Principal],
    ) -> RecallOut:
        """Recall memories.

        Hybrid recall: the stages (vector, BM25, graph, …) are fused and ranked, each hit scored
        with the probability (0–1) that it answers the query. Filters narrow it; `as_of` and
        `known_at` ask what was valid or known then; `reference_time` anchors relative times in the
        query. See docs/recall.md."""
        filters = memory_filters(data.filters, data.as_of, data.known_at)
        request = data.into(RecallRequest, text=data.query, filters=filters)
        outcome = await recall.recall(principal, request)
        result = recall_result(outcome)
        return RecallOut(
            results=[RecallHit(**hit) for hit in result["results"]],
            timings_ms=outcome.timings_ms,
            degraded=result["degraded"],
            degraded_reasons=result["degraded_reasons"],
            ranker=outcome.ranker,
            explain=outcome.explain,
        )
