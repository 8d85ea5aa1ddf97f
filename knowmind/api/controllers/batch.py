"""``POST /v1/memories/batch``: many memories in one request, a result per item."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from knowmind.api.batch_schemas import BatchIn, BatchItemOut, BatchOut, ItemErrorOut
from knowmind.api.errors import field_of_message
from knowmind.api.schemas import MemoryIn
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.batch import ItemError, remember_batch
from knowmind.services.graph import InlineRelation
from knowmind.services.memories import MemoryDraft

__all__ = ["BatchController", "draft_or_error"]


def draft_or_error(item: Any) -> MemoryDraft | ItemError:
    """One item validated like a single ``POST /v1/memories`` body."""
    try:
        data = msgspec.convert(item, MemoryIn)
    except msgspec.ValidationError as exc:
        field, message = field_of_message(str(exc))
        return ItemError(field, message)
    if _has_nul(data.metadata):
        return ItemError("metadata", "must not contain NUL characters")
    return MemoryDraft(
        content=data.content,
        title=data.title,
        memory_type=data.memory_type,
        tags=tuple(data.tags),
        source=data.source,
        domain=data.domain,
        metadata=data.metadata,
        relations=tuple(InlineRelation(**msgspec.structs.asdict(r)) for r in data.relations),
    )


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


class BatchController(Controller):
    path = "/v1/memories/batch"
    tags = ["memories"]

    @post("/", opt={"scope": "write"}, status_code=200)
    async def remember_batch(
        self,
        data: JSONBody[BatchIn],
        runtime: NamedDependency[Runtime],
        principal: NamedDependency[Principal],
    ) -> BatchOut:
        """Store up to 100 memories: each in its own transaction (a bad item does not fail the
        others), all new chunks embedded together. 200 with a result per item, in order."""
        drafts = [draft_or_error(item) for item in data.items]
        results = await remember_batch(runtime.memories, principal, drafts)
        out = [
            BatchItemOut(
                index=r.index,
                status=r.status,  # type: ignore[arg-type]
                id=r.id,
                chunks=r.chunks,
                job_id=r.job_id,
                error=ItemErrorOut(r.error.field, r.error.message) if r.error else None,
            )
            for r in results
        ]
        count = {s: sum(r.status == s for r in results) for s in ("created", "unchanged", "error")}
        return BatchOut(count["created"], count["unchanged"], count["error"], out)
