"""Background jobs as the caller sees them: read one, or wait until it is finished."""

from __future__ import annotations

import asyncio
import time
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.db.engine import Database
from knowmind.errors import NotFoundError
from knowmind.services.auth import Principal, tenant_of
from knowmind.store import jobs as job_store
from knowmind.store import memories as memory_store
from knowmind.store.jobs import JobRow

__all__ = ["JobRow", "JobService"]


class JobService:
    def __init__(self, db: Database, wait_timeout_seconds: float) -> None:
        self.db = db
        self.wait_timeout_seconds = wait_timeout_seconds

    async def get(self, who: Principal, job_id: UUID) -> JobRow:
        """A user-bound token sees the jobs of the memories it sees, no other."""
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            row = await job_store.get_job(conn, tenant, job_id)
            if row is not None and who.user_id is not None and not await _visible(conn, row):
                row = None
        if row is None:
            raise NotFoundError(f"job {job_id} not found")
        return row

    async def wait_for_job(self, who: Principal, job_id: UUID) -> JobRow:
        """Poll until the job is done or failed, or the wait timeout passes."""
        deadline = time.monotonic() + self.wait_timeout_seconds
        while True:
            row = await self.get(who, job_id)
            if row.status in ("done", "failed") or time.monotonic() > deadline:
                return row
            await asyncio.sleep(0.05)


async def _visible(conn: AsyncConnection, row: JobRow) -> bool:
    """Whether the job is about a memory this (row-level-security scoped) session sees."""
    memory = row.payload.get("memory_id") or (row.result or {}).get("memory_id")
    try:
        memory_id = UUID(str(memory))
    except ValueError:
        return False
    return await memory_store.get_memory(conn, row.tenant_id, memory_id) is not None
