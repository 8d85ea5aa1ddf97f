"""Each chunk's sentence vectors (``chunks.sentence_vectors``, migration 0024): float16 rows,
one after the other, written by the extraction job and read with the ranker's short list."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["best_sentence_cosine", "pack_vectors", "queue_sentence_jobs", "set_sentence_vectors"]


def pack_vectors(vectors: np.ndarray) -> bytes:
    """The rows of ``vectors`` as stored (L2-normalised first: float16 keeps unit vectors
    to three decimals)."""
    rows = np.asarray(vectors, dtype=np.float32)
    rows = rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)
    return np.ascontiguousarray(rows, dtype=np.float16).tobytes()


def best_sentence_cosine(stored: bytes, query: np.ndarray) -> float:
    """The question's (``query``) cosine to the chunk's closest sentence."""
    rows = np.frombuffer(stored, dtype=np.float16).reshape(-1, len(query)).astype(np.float32)
    q = np.asarray(query, dtype=np.float32)
    return float((rows @ q).max() / max(float(np.linalg.norm(q)), 1e-12))


async def set_sentence_vectors(
    conn: AsyncConnection, tenant_id: UUID, vectors: Sequence[tuple[UUID, bytes]]
) -> None:
    """Store each (chunk id, packed vectors); a chunk deleted meanwhile is skipped."""
    if not vectors:
        return
    await conn.execute(
        text(
            "UPDATE chunks c SET sentence_vectors = v.vectors "
            "FROM unnest(CAST(:ids AS uuid[]), CAST(:vectors AS bytea[])) AS v (id, vectors) "
            "WHERE c.tenant_id = :t AND c.id = v.id"
        ),
        {"t": tenant_id, "ids": [c for c, _ in vectors], "vectors": [b for _, b in vectors]},
    )


async def queue_sentence_jobs(conn: AsyncConnection, tenant_id: UUID, job_kind: str) -> int:
    """Queue a ``job_kind`` job for each of the tenant's memories with a chunk of several
    sentences but no sentence vectors (under 40 characters a chunk holds at most one sentence
    worth a vector); how many."""
    result = await conn.execute(
        text(
            "INSERT INTO jobs (tenant_id, kind, payload) "
            "SELECT :t, :kind, jsonb_build_object('memory_id', CAST(m.id AS text)) "
            "FROM memories m WHERE m.tenant_id = :t AND EXISTS (SELECT 1 FROM chunks c "
            "WHERE c.tenant_id = :t AND c.memory_id = m.id AND c.sentence_vectors IS NULL "
            "AND length(c.content) >= 40)"
        ),
        {"t": tenant_id, "kind": job_kind},
    )
    return int(result.rowcount or 0)
