"""Counts for one tenant (inside its transaction)."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["RECALL_TABLES", "analyze_recall_tables", "ping", "tenant_stats"]

# The tables a recall plans its statements over.
RECALL_TABLES = (
    "memories",
    "chunks",
    "chunk_sentences",
    "chunk_terms",
    "bm25_lexemes",
    "bm25_corpus",
    "entities",
    "entity_names",
    "mentions",
    "edges",
)


async def analyze_recall_tables(conn: AsyncConnection) -> None:
    """Fresh planner statistics for the recall tables (as the schema owner). Right after a
    bulk load the planner does not know the new rows until autovacuum analyses them (up to a
    minute or more) and may pick scans that cost several times more meanwhile."""
    await conn.execute(text(f"ANALYZE {', '.join(RECALL_TABLES)}"))


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
                # what counts for the quota on queued background bytes
                "(SELECT coalesce(sum(payload_bytes), 0) FROM jobs WHERE tenant_id = :t "
                " AND status IN ('pending', 'running')) AS queued_bytes, "
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
