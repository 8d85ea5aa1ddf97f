"""Recall for a caller: the request runs in the caller's tenant and language."""

from __future__ import annotations

from dataclasses import replace

from knowmind.errors import InvalidInputError
from knowmind.metrics import observe_recall_timings
from knowmind.recall.base import RecallRequest
from knowmind.recall.pipeline import RecallOutcome, RecallPipeline
from knowmind.services.auth import Principal, tenant_of

__all__ = ["RecallService"]


class RecallService:
    def __init__(self, pipeline: RecallPipeline, candidates: int) -> None:
        """``candidates``: how many hits each stage returns before fusion (at least ``k``)."""
        self.pipeline = pipeline
        self.candidates = candidates

    async def recall(self, who: Principal, request: RecallRequest) -> RecallOutcome:
        tenant = tenant_of(who)
        if not request.text.strip():
            raise InvalidInputError("query", "must not be blank")
        resolved = replace(
            request,
            tenant_id=tenant,
            language=who.language,
            text=request.text.strip(),
            candidates=max(self.candidates, request.k),
        )
        outcome = await self.pipeline.recall(resolved)
        observe_recall_timings(outcome.timings_ms, resolved.tenant_id)
        return outcome
