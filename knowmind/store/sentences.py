"""Each chunk's sentence vectors (``chunk_sentences``, migration 0024): float16 rows, one after
the other (empty: a chunk of one sentence, looked at), written by the extraction job and read
with the ranker's short list."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "ChunkText",
    "best_sentence_cosine",
    "chunks_without_sentences",
    "count_chunks_without_sentences",
    "pack_vectors",
    "queue_sentence_job",
    "set_sentence_vectors",
]


def pack_vectors(vectors: np.ndarray) -> bytes:
    """The rows of ``vectors`` as stored (L2-normalised first: float16 keeps unit vectors
    to three decimals)."""
    rows = np.asarray(vectors, dtype=np.float32)
    rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return np.ascontiguousarray(rows, dtype=np.float16).tobytes()


def best_sentence_cosine(stored: bytes, query: np.ndarray) -> float | None:
    """The question's (``query``) cosine to the chunk's closest sentence; None where none is
    stored (a chunk of one sentence: empty) or the rows are not of the query's dimension."""
    q = np.asarray(query, dtype=np.float32)
    if not stored or not q.size or len(stored) % (2 * q.size):
        return None
    rows = np.frombuffer(stored, dtype=np.float16).reshape(-1, q.size).astype(np.float32)
    return float((rows @ q).max() / max(float(np.linalg.norm(q)), 1e-12))


async def set_sentence_vectors(
    conn: AsyncConnection, tenant_id: UUID, vectors: Sequence[tuple[UUID, bytes]]
) -> None:
    """Store each (chunk id, packed vectors); a chunk deleted meanwhile is skipped.

    The chunks are locked (``FOR KEY SHARE``, as the foreign key check would) before the
    insert: one that a concurrent deletion removes is waited for and then left out, where the
    foreign key check alone would fail the whole statement."""
    if not vectors:
        return
    await conn.execute(
        text(
            "WITH live AS (SELECT c.id FROM chunks c WHERE c.tenant_id = :t "
            "AND c.id = ANY(CAST(:ids AS uuid[])) ORDER BY c.id FOR KEY SHARE) "
            "INSERT INTO chunk_sentences (tenant_id, chunk_id, vectors) "
            "SELECT :t, v.id, v.vectors "
            "FROM unnest(CAST(:ids AS uuid[]), CAST(:vectors AS bytea[])) AS v (id, vectors) "
            "JOIN live ON live.id = v.id ORDER BY v.id "
            "ON CONFLICT (tenant_id, chunk_id) DO UPDATE SET vectors = excluded.vectors"
        ),
        {"t": tenant_id, "ids": [c for c, _ in vectors], "vectors": [b for _, b in vectors]},
    )


@dataclass(frozen=True, slots=True)
class ChunkText:
    id: UUID
    content: str
    title: str | None  # its memory's


# A chunk ``c`` of the tenant that may hold sentences worth vectors (40 characters or more:
# shorter ones hold at most one) and has none stored yet: what the backfill walks and counts.
_WITHOUT_SENTENCES = (
    "c.tenant_id = :t AND length(c.content) >= 40 AND NOT EXISTS (SELECT 1 FROM "
    "chunk_sentences s WHERE s.tenant_id = :t AND s.chunk_id = c.id)"
)


async def chunks_without_sentences(
    conn: AsyncConnection, tenant_id: UUID, after: UUID | None, limit: int
) -> list[ChunkText]:
    """The tenant's next ``limit`` chunks (by id, after ``after``) of 40 characters or more
    (shorter ones hold at most one sentence worth a vector) that have no sentence vectors."""
    rows = await conn.execute(
        text(
            "SELECT c.id, c.content, m.title FROM chunks c "
            "JOIN memories m ON m.tenant_id = c.tenant_id AND m.id = c.memory_id "
            f"WHERE {_WITHOUT_SENTENCES} AND (CAST(:after AS uuid) IS NULL OR c.id > :after) "
            "ORDER BY c.id LIMIT :n"
        ),
        {"t": tenant_id, "after": after, "n": limit},
    )
    return [ChunkText(r.id, r.content, r.title) for r in rows]


async def count_chunks_without_sentences(conn: AsyncConnection, tenant_id: UUID) -> int:
    """How many of the tenant's chunks ``chunks_without_sentences`` would still walk."""
    count = await conn.scalar(
        text(f"SELECT count(*) FROM chunks c WHERE {_WITHOUT_SENTENCES}"),
        {"t": tenant_id},
    )
    return int(count or 0)


async def queue_sentence_job(
    conn: AsyncConnection, tenant_id: UUID, job_kind: str, after: UUID | None = None
) -> bool:
    """Queue the tenant's ``job_kind`` job (its chunks without sentence vectors, in steps; from
    the chunk id ``after`` on) unless one is waiting already; whether one was queued."""
    payload = json.dumps({"after": str(after)} if after else {})
    result = await conn.execute(
        text(
            "INSERT INTO jobs (tenant_id, kind, payload) SELECT :t, :kind, CAST(:p AS jsonb) "
            "WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE tenant_id = :t AND kind = :kind "
            "AND status = 'pending')"
        ),
        {"t": tenant_id, "kind": job_kind, "p": payload},
    )
    return bool(result.rowcount)
