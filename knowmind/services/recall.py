"""Recall: turn a request into a pipeline query."""

from __future__ import annotations

from knowmind.errors import InvalidInputError
from knowmind.recall.base import RecallQuery
from knowmind.recall.pipeline import RecallOptions, RecallOutcome, RecallPipeline
from knowmind.services.auth import Principal, tenant_of
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
        options: RecallOptions,
        filters: MemoryFilters | None = None,
        hops: int = 2,
        explain: bool = False,
    ) -> RecallOutcome:
        tenant = tenant_of(who)
        if not query.strip():
            raise InvalidInputError("query", "must not be blank")
        request = RecallQuery(
            tenant_id=tenant,
            language=who.language,
            text=query.strip(),
            filters=filters or MemoryFilters(),
            candidates=max(self.settings.recall_candidates, options.k),
            hops=hops,
            explain=explain,
        )
        return await self.pipeline.recall(request, options)
