"""Counts for one tenant (inside its transaction)."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["ping", "tenant_stats"]


async def tenant_stats(conn: AsyncConnection, tenant_id: UUID) -> dict[str, int]:
    row = (
        await conn.execute(
            text(
                "SELECT "
                "(SELECT count(*) FROM memories WHERE tenant_id = :t) AS memories, "
                "(SELECT count(*) FROM memories WHERE tenant_id = :t "
                " AND (valid_to IS NULL OR valid_to > now())) AS current_memories, "
                "(SELECT count(*) FROM documents WHERE tenant_id = :t) AS documents, "
                "(SELECT count(*) FROM chunks WHERE tenant_id = :t) AS chunks, "
                "(SELECT count(*) FROM entities WHERE tenant_id = :t) AS entities, "
                "(SELECT count(*) FROM edges WHERE tenant_id = :t) AS edges, "
                "(SELECT count(*) FROM mentions WHERE tenant_id = :t) AS mentions, "
                "(SELECT count(*) FROM jobs WHERE tenant_id = :t "
                " AND status IN ('pending', 'running')) AS pending_jobs, "
                "(SELECT count(*) FROM jobs WHERE tenant_id = :t AND status = 'failed') "
                " AS failed_jobs"
            ),
            {"t": tenant_id},
        )
    ).one()
    return {key: int(value) for key, value in row._mapping.items()}


async def ping(conn: AsyncConnection) -> None:
    """Raises when the database does not answer."""
    await conn.execute(text("SELECT 1"))
