"""What the ranker reads about the fused short list: each chunk as recall shows it, plus the
facts every candidate has whichever stage found it — its cosine similarity to the question, the
question's lexemes it contains, and the entities its memory is tied to."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

import numpy as np

from knowmind.store.rows import ChunkHit
from knowmind.store.sentences import best_sentence_cosine
from knowmind.store.sql import Conn, fetch, vector_text

__all__ = ["CandidateFacts", "candidate_facts", "memory_entities"]


@dataclass(frozen=True, slots=True)
class CandidateFacts:
    chunk: ChunkHit
    cosine: float | None  # None: no query embedding (or a chunk without one)
    matched_lexemes: frozenset[str]
    language: str | None = None  # the memory's content language, None when unknown
    # the question's cosine to the chunk's closest sentence; None where the chunk has no sentence
    # vectors (one sentence, or not made yet)
    sentence_cosine: float | None = None


_FACTS = (
    "SELECT c.id AS chunk_id, c.memory_id, c.content, m.title, m.source, m.memory_type, "
    "m.created_at, c.kind, m.occurred_at, m.speaker, m.speaker_role, m.content_language, "
    "{cosine} AS cosine, {sentences} AS sentence_vectors, "
    "ARRAY(SELECT l FROM unnest(tsvector_to_array(c.tsv)) AS l "
    "WHERE l = ANY(CAST(:lexemes AS text[]))) AS matched "
    "FROM chunks c JOIN memories m ON m.tenant_id = c.tenant_id AND m.id = c.memory_id "
    "WHERE c.tenant_id = :tenant AND c.id = ANY(:ids)"
)

_SENTENCES = (
    "(SELECT s.vectors FROM chunk_sentences s WHERE s.tenant_id = c.tenant_id "
    "AND s.chunk_id = c.id)"
)


async def candidate_facts(
    conn: Conn,
    tenant_id: UUID,
    chunk_ids: Sequence[UUID],
    embedding: np.ndarray | None,
    lexemes: Sequence[str],
) -> dict[UUID, CandidateFacts]:
    """{chunk id: its facts} for the chunks that still exist."""
    if not chunk_ids:
        return {}
    cosine, sentences = "NULL::float8", "NULL::bytea"
    params: dict[str, object] = {"tenant": tenant_id, "ids": list(chunk_ids)}
    if embedding is not None:
        cosine = "1 - (c.embedding <=> CAST(:embedding AS vector))"
        sentences = _SENTENCES
        params["embedding"] = vector_text(embedding)
    params["lexemes"] = list(lexemes)
    rows = await fetch(conn, _FACTS.format(cosine=cosine, sentences=sentences), params)
    facts = {}
    for row in rows:
        values = dict(row)
        cos, matched = values.pop("cosine"), values.pop("matched")
        language, sentences = values.pop("content_language"), values.pop("sentence_vectors")
        facts[row["chunk_id"]] = CandidateFacts(
            ChunkHit(**values),
            None if cos is None else float(cos),
            frozenset(matched or ()),
            language,
            None
            if sentences is None or embedding is None
            else best_sentence_cosine(sentences, embedding),
        )
    return facts


async def memory_entities(
    conn: Conn, tenant_id: UUID, memory_ids: Sequence[UUID]
) -> dict[UUID, dict[UUID, str]]:
    """{memory id: {entity id: its normalised name}} of the entities each memory mentions or is
    linked to by an edge of its own."""
    if not memory_ids:
        return {}
    rows = await fetch(
        conn,
        (
            "SELECT x.memory_id, x.entity_id, e.norm_name FROM ("
            "SELECT memory_id, entity_id FROM mentions "
            "WHERE tenant_id = :tenant AND memory_id = ANY(:ids) "
            "UNION SELECT from_id, to_id FROM edges WHERE tenant_id = :tenant "
            "AND from_kind = 'memory' AND to_kind = 'entity' AND from_id = ANY(:ids) "
            "AND valid_to IS NULL) AS x "
            "JOIN entities e ON e.tenant_id = :tenant AND e.id = x.entity_id"
        ),
        {"tenant": tenant_id, "ids": list(memory_ids)},
    )
    found: dict[UUID, dict[UUID, str]] = {m: {} for m in memory_ids}
    for memory_id, entity_id, name in rows:
        found[memory_id][entity_id] = name
    return found
