"""Rows the services read by id, or answer 404 for."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.errors import NotFoundError
from knowmind.store import memories as memory_store
from knowmind.store.rows import MemoryRow

__all__ = ["memory_or_404"]


async def memory_or_404(conn: AsyncConnection, tenant: UUID, memory_id: UUID) -> MemoryRow:
    """The tenant's memory; ``NotFoundError`` when there is none with this id (or the caller
    may not see it)."""
    row = await memory_store.get_memory(conn, tenant, memory_id)
    if row is None:
        raise NotFoundError(f"memory {memory_id} not found")
    return row
