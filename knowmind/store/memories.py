"""memories and their chunks (data plane: called inside a tenant transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
import numpy as np
from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.rows import MemoryRow, MemoryValues
from knowmind.store.scalars import maybe_id

__all__ = [
    "InsertedMemory",
    "NewMemory",
    "chunk_counts",
    "chunk_texts",
    "delete_memory",
    "find_by_sha",
    "find_by_shas",
    "get_memory",
    "insert_memory",
    "list_memories",
    "memory_title",
]

_MEMORY_COLUMNS = (
    "m.id, m.title, m.content, m.memory_type, m.tags, m.source, m.domain, m.metadata, "
    "m.created_at, m.valid_from, m.valid_to, m.document_id, m.recorded_at, m.superseded_at"
)


class NewMemory(MemoryValues, frozen=True, kw_only=True):
    """Values of a memory about to be inserted."""

    sha256: bytes
    document_id: UUID | None = None


async def find_by_sha(conn: AsyncConnection, tenant_id: UUID, sha256: bytes) -> UUID | None:
    return await maybe_id(
        conn,
        text(
            "SELECT id FROM memories WHERE tenant_id = :tenant AND content_sha256 = :sha "
            "AND document_id IS NULL AND superseded_at IS NULL"
        ),
        {"tenant": tenant_id, "sha": sha256},
    )


async def find_by_shas(
    conn: AsyncConnection, tenant_id: UUID, shas: Sequence[bytes]
) -> dict[bytes, UUID]:
    """{sha256: id} of the current standalone memories with these contents."""
    if not shas:
        return {}
    rows = await conn.execute(
        text(
            "SELECT content_sha256, id FROM memories WHERE tenant_id = :tenant "
            "AND content_sha256 = ANY(:shas) AND document_id IS NULL AND superseded_at IS NULL"
        ),
        {"tenant": tenant_id, "shas": list(shas)},
    )
    return {bytes(r[0]): r[1] for r in rows}


async def chunk_counts(
    conn: AsyncConnection, tenant_id: UUID, memory_ids: Sequence[UUID]
) -> dict[UUID, int]:
    if not memory_ids:
        return {}
    rows = await conn.execute(
        text(
            "SELECT memory_id, count(*) FROM chunks WHERE tenant_id = :tenant "
            "AND memory_id = ANY(:ids) GROUP BY memory_id"
        ),
        {"tenant": tenant_id, "ids": list(memory_ids)},
    )
    return {r[0]: int(r[1]) for r in rows}


# The memory, its chunks and its first job in one statement (one round trip, and the chunks'
# statement-level BM25 triggers run once for the memory, not once per chunk). Nothing is written
# when a current memory with the same content exists (no row from ``m``). The vectors travel as
# one flat real[] (binary, no text formatting) that each chunk slices; the column's assignment
# cast makes them vector or halfvec.
_INSERT_MEMORY = text(
    "WITH m AS (INSERT INTO memories (tenant_id, title, content, memory_type, tags, source, "
    "domain, metadata, content_sha256, document_id) VALUES (:tenant, :title, :content, "
    ":memory_type, :tags, :source, :domain, :metadata, :sha256, :document_id) "
    "ON CONFLICT (tenant_id, content_sha256) "
    "WHERE document_id IS NULL AND superseded_at IS NULL DO NOTHING RETURNING id), "
    "c AS (INSERT INTO chunks (tenant_id, memory_id, ordinal, content, context, language, "
    "embedding, kind) SELECT :tenant, m.id, x.n - 1, x.content, :context, "
    "CAST(:language AS regconfig), "
    "(CAST(:vectors AS real[]))[(x.n - 1) * :dim + 1 : x.n * :dim], x.kind "
    "FROM m, unnest(CAST(:contents AS text[]), CAST(:kinds AS text[])) "
    "WITH ORDINALITY AS x (content, kind, n) RETURNING 1), "
    "j AS (INSERT INTO jobs (tenant_id, kind, payload) SELECT :tenant, :job_kind, "
    "jsonb_build_object('memory_id', CAST(m.id AS text)) FROM m RETURNING id) "
    "SELECT m.id, j.id AS job_id, (SELECT count(*) FROM c) AS chunks FROM m, j"
).bindparams(bindparam("metadata", type_=JSONB))


@dataclass(frozen=True, slots=True)
class InsertedMemory:
    id: UUID
    chunks: int
    job_id: UUID


async def insert_memory(
    conn: AsyncConnection,
    tenant_id: UUID,
    memory: NewMemory,
    *,
    language: str,
    contents: Sequence[str],
    embeddings: np.ndarray,
    kinds: Sequence[str | None] = (),
    job_kind: str,
) -> InsertedMemory | None:
    """The memory, its chunks (``contents`` with their ``embeddings``, one row each, and
    optional statement ``kinds``, see ``contract.limits.STATEMENT_KINDS``) and a ``job_kind``
    job for it; None when a current memory with the same content exists (a concurrent
    insert): nothing written."""
    if len(embeddings) != len(contents):
        raise ValueError(f"{len(contents)} chunks but {len(embeddings)} embeddings")
    vectors = np.ascontiguousarray(embeddings, dtype=np.float32)
    row = (
        await conn.execute(
            _INSERT_MEMORY,
            {
                "tenant": tenant_id,
                **msgspec.structs.asdict(memory),
                "context": memory.title,
                "language": language,
                "contents": list(contents),
                "kinds": [kinds[i] if i < len(kinds) else None for i in range(len(contents))],
                "vectors": vectors.ravel().tolist(),
                "dim": vectors.shape[1],
                "job_kind": job_kind,
            },
        )
    ).one_or_none()
    return InsertedMemory(row.id, int(row.chunks), row.job_id) if row else None


async def get_memory(conn: AsyncConnection, tenant_id: UUID, memory_id: UUID) -> MemoryRow | None:
    row = (
        await conn.execute(
            text(
                f"SELECT {_MEMORY_COLUMNS}, (SELECT count(*) FROM chunks c WHERE "
                "c.tenant_id = m.tenant_id AND c.memory_id = m.id) AS chunk_count "
                "FROM memories m WHERE m.tenant_id = :tenant AND m.id = :id"
            ),
            {"tenant": tenant_id, "id": memory_id},
        )
    ).one_or_none()
    return MemoryRow(**row._mapping) if row else None


async def list_memories(
    conn: AsyncConnection,
    tenant_id: UUID,
    limit: int,
    after: tuple[datetime, UUID] | None = None,
) -> list[MemoryRow]:
    """Newest first; ``after`` is the (created_at, id) of the last row of the previous page."""
    where = "m.tenant_id = :tenant"
    params: dict[str, Any] = {"tenant": tenant_id, "limit": limit}
    if after is not None:
        where += " AND (m.created_at, m.id) < (:after_ts, :after_id)"
        params.update(after_ts=after[0], after_id=after[1])
    rows = await conn.execute(
        text(
            f"SELECT {_MEMORY_COLUMNS} FROM memories m WHERE {where} "
            "ORDER BY m.created_at DESC, m.id DESC LIMIT :limit"
        ),
        params,
    )
    return [MemoryRow(**r._mapping) for r in rows]


async def delete_memory(conn: AsyncConnection, tenant_id: UUID, memory_id: UUID) -> int | None:
    """Deletes the memory and its chunks; the number of chunks removed, None if not found."""
    chunks = await conn.execute(
        text("DELETE FROM chunks WHERE tenant_id = :tenant AND memory_id = :id RETURNING id"),
        {"tenant": tenant_id, "id": memory_id},
    )
    removed = len(chunks.all())
    deleted = await conn.scalar(
        text("DELETE FROM memories WHERE tenant_id = :tenant AND id = :id RETURNING id"),
        {"tenant": tenant_id, "id": memory_id},
    )
    return removed if deleted else None


async def close_validity(
    conn: AsyncConnection, tenant_id: UUID, memory_id: UUID
) -> MemoryRow | None:
    """End a current memory's valid time and transaction time now (it is being superseded);
    None when it does not exist or is no longer current."""
    row = (
        await conn.execute(
            text(
                "UPDATE memories m SET valid_to = now(), superseded_at = now() "
                "WHERE m.tenant_id = :tenant AND m.id = :id AND m.superseded_at IS NULL "
                f"AND (m.valid_to IS NULL OR m.valid_to > now()) RETURNING {_MEMORY_COLUMNS}"
            ),
            {"tenant": tenant_id, "id": memory_id},
        )
    ).one_or_none()
    return MemoryRow(**row._mapping) if row else None


async def memory_ids_of_document(
    conn: AsyncConnection, tenant_id: UUID, document_id: UUID
) -> list[UUID]:
    rows = await conn.execute(
        text("SELECT id FROM memories WHERE tenant_id = :t AND document_id = :d"),
        {"t": tenant_id, "d": document_id},
    )
    return list(rows.scalars())


async def memory_title(conn: AsyncConnection, tenant_id: UUID, memory_id: UUID) -> str | None:
    title = await conn.scalar(
        text("SELECT title FROM memories WHERE tenant_id = :t AND id = :m"),
        {"t": tenant_id, "m": memory_id},
    )
    return None if title is None else str(title)


async def chunk_texts(
    conn: AsyncConnection, tenant_id: UUID, memory_id: UUID
) -> list[tuple[UUID, str]]:
    """(chunk id, content) of a memory's chunks in order."""
    rows = await conn.execute(
        text(
            "SELECT id, content FROM chunks WHERE tenant_id = :t AND memory_id = :m "
            "ORDER BY ordinal"
        ),
        {"t": tenant_id, "m": memory_id},
    )
    return [(r.id, r.content) for r in rows]
