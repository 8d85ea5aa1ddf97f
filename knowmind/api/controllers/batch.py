"""``POST /v1/memories/batch``: many memories in one request, a result per item."""

from __future__ import annotations

from litestar import Controller, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from knowmind.api.batch_schemas import (
    BatchIn,
    BatchItemOut,
    BatchOut,
    ItemErrorOut,
    draft_or_error,
)
from knowmind.services.auth import Principal
from knowmind.services.batch import remember_batch
from knowmind.services.memories import MemoryService

__all__ = ["BatchController"]


class BatchController(Controller):
    path = "/v1/memories/batch"
    tags = ["memories"]

    @post("/", opt={"scope": "write"}, status_code=200)
    async def remember_batch(
        self,
        data: JSONBody[BatchIn],
        memories: NamedDependency[MemoryService],
        principal: NamedDependency[Principal],
    ) -> BatchOut:
        """Store many memories at once.

        Store up to 100 memories, all new chunks embedded together; a bad item does not fail
        the others (``services.batch``). 200 with a result per item, in order."""
        drafts = [draft_or_error(item) for item in data.items]
        results = await remember_batch(memories, principal, drafts)
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
