"""RAPTOR summary trees (migration 0012): a document's summary nodes, written by the tree job and
searched by the ``raptor`` answer method only (data plane: inside a tenant transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import numpy as np
from pgvector.sqlalchemy import Vector
from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.search import MemoryFilters
from knowmind.store.sql import Conn, fetch, vector_text

__all__ = [
    "DocumentLeaves",
    "NewSummary",
    "SummaryHit",
    "delete_document_tree",
    "document_leaves",
    "insert_summaries",
    "nearest_summaries",
    "tree_sizes",
]


@dataclass(frozen=True, slots=True)
class DocumentLeaves:
    """A document's chunks in order, with their embeddings (the tree's leaves)."""

    document_id: UUID
    memory_id: UUID
    title: str | None
    contents: list[str]
    embeddings: np.ndarray


@dataclass(frozen=True, slots=True)
class NewSummary:
    level: int
    content: str
    children: int
    embedding: np.ndarray


@dataclass(frozen=True, slots=True)
class SummaryHit:
    id: UUID
    document_id: UUID
    memory_id: UUID
    title: str | None
    level: int
    content: str
    similarity: float


async def document_leaves(
    conn: AsyncConnection, tenant_id: UUID, document_id: UUID
) -> DocumentLeaves | None:
    """The document's current chunks (its one memory's), or None when it is gone."""
    rows = (
        await conn.execute(
            text(
                "SELECT m.id AS memory_id, m.title, c.content, CAST(c.embedding AS real[]) AS e "
                "FROM memories m JOIN chunks c ON c.tenant_id = m.tenant_id AND c.memory_id = m.id "
                "WHERE m.tenant_id = :t AND m.document_id = :d AND c.kind IS NULL "
                "ORDER BY c.ordinal"
            ),
            {"t": tenant_id, "d": document_id},
        )
    ).all()
    if not rows:
        return None
    return DocumentLeaves(
        document_id,
        rows[0].memory_id,
        rows[0].title,
        [r.content for r in rows],
        np.asarray([r.e for r in rows], dtype=np.float32),
    )


async def delete_document_tree(conn: AsyncConnection, tenant_id: UUID, document_id: UUID) -> int:
    """Remove the document's summary nodes (a rebuilt or replaced document's old tree)."""
    result = await conn.execute(
        text("DELETE FROM summary_nodes WHERE tenant_id = :t AND document_id = :d"),
        {"t": tenant_id, "d": document_id},
    )
    return int(result.rowcount or 0)


_INSERT = text(
    "INSERT INTO summary_nodes (tenant_id, document_id, level, content, children, embedding, "
    "model) VALUES (:t, :d, :level, :content, :children, :embedding, :model)"
).bindparams(bindparam("embedding", type_=Vector()))


async def insert_summaries(
    conn: AsyncConnection,
    tenant_id: UUID,
    document_id: UUID,
    summaries: Sequence[NewSummary],
    model: str,
) -> None:
    if not summaries:
        return
    await conn.execute(
        _INSERT,
        [
            {
                "t": tenant_id,
                "d": document_id,
                "level": s.level,
                "content": s.content,
                "children": s.children,
                "embedding": s.embedding,
                "model": model,
            }
            for s in summaries
        ],
    )


async def tree_sizes(conn: AsyncConnection, tenant_id: UUID, document_id: UUID) -> dict[int, int]:
    """{level: nodes} of the document's tree (empty: no tree)."""
    rows = await conn.execute(
        text(
            "SELECT level, count(*) AS n FROM summary_nodes "
            "WHERE tenant_id = :t AND document_id = :d GROUP BY level ORDER BY level"
        ),
        {"t": tenant_id, "d": document_id},
    )
    return {int(r.level): int(r.n) for r in rows}


async def nearest_summaries(
    conn: Conn, tenant_id: UUID, embedding: np.ndarray, filters: MemoryFilters, limit: int
) -> list[SummaryHit]:
    """The tenant's summary nodes nearest the query (exact cosine: a few per document), of
    documents whose memory passes ``filters``."""
    where, params = filters.sql()
    params |= {"tenant": tenant_id, "embedding": vector_text(embedding), "limit": limit}
    rows = await fetch(
        conn,
        (
            "SELECT s.id, s.document_id, m.id AS memory_id, m.title, s.level, s.content,"
            " 1 - (s.embedding <=> :embedding) AS similarity FROM summary_nodes s"
            " JOIN memories m ON m.tenant_id = s.tenant_id AND m.document_id = s.document_id"
            f" WHERE s.tenant_id = :tenant{where}"
            " ORDER BY s.embedding <=> :embedding, s.id LIMIT :limit"
        ),
        params,
    )
    return [SummaryHit(r[0], r[1], r[2], r[3], int(r[4]), r[5], float(r[6])) for r in rows]
