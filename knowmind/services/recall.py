"""Recall: turn a request into a pipeline query."""

from __future__ import annotations

from collections.abc import Mapping

from knowmind.errors import InvalidInputError
from knowmind.recall.base import RecallQuery
from knowmind.recall.pipeline import RecallOutcome, RecallPipeline
from knowmind.services.auth import Principal
from knowmind.settings import Settings
from knowmind.store.search import MemoryFilters

__all__ = ["RecallService"]


class RecallService:
    def __init__(self, pipeline: RecallPipeline, settings: Settings) -> None:
        self.pipeline = pipeline
        self.settings = settings

    async def recall(
        self,
        who: Principal,
        query: str,
        k: int = 5,
        filters: MemoryFilters | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> RecallOutcome:
        if who.tenant_id is None:
            raise InvalidInputError("authorization", "recall needs a tenant token")
        if not query.strip():
            raise InvalidInputError("query", "must not be blank")
        request = RecallQuery(
            tenant_id=who.tenant_id,
            language=who.language,
            text=query.strip(),
            filters=filters or MemoryFilters(),
            candidates=max(self.settings.recall_candidates, k),
        )
        return await self.pipeline.recall(request, k=k, weights=weights)
