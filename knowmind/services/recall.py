"""Recall for a caller: the request runs in the caller's tenant and language."""

from __future__ import annotations

import time
from dataclasses import replace

from knowmind.errors import InvalidInputError
from knowmind.metrics import observe_recall_timings
from knowmind.recall.base import RecallRequest
from knowmind.recall.pipeline import RecallOutcome, RecallPipeline
from knowmind.services.admission import FairGate
from knowmind.services.auth import Principal, tenant_of

__all__ = ["RecallService"]


class RecallService:
    def __init__(
        self, pipeline: RecallPipeline, candidates: int, gate: FairGate | None = None
    ) -> None:
        """``candidates``: how many hits each stage returns before fusion (at least ``k``);
        ``gate``: admits recalls (timings' ``queue``: the wait); none: all run at once."""
        self.pipeline = pipeline
        self.candidates = candidates
        self.gate = gate

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
        if self.gate is None:
            outcome = await self.pipeline.recall(resolved)
        else:
            arrived = time.perf_counter()
            async with self.gate.admit(tenant):
                waited_ms = round((time.perf_counter() - arrived) * 1000, 2)
                outcome = await self.pipeline.recall(resolved)
            outcome.timings_ms["queue"] = waited_ms
            outcome.timings_ms["total"] = round(outcome.timings_ms["total"] + waited_ms, 2)
        observe_recall_timings(outcome.timings_ms, resolved.tenant_id)
        return outcome
