"""memories and their chunks (data plane: called inside a tenant transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.rows import MemoryRow
from knowmind.store.scalars import maybe_id
from knowmind.store.search import MemoryFilters

__all__ = [
    "Draft",
    "InsertedMemory",
    "MemoryToInsert",
    "chunk_counts",
    "chunk_texts",
    "delete_memory",
    "find_by_sha",
    "find_by_shas",
    "get_memory",
    "hold_memory",
    "insert_memories",
    "insert_memory",
    "list_memories",
    "lock_memories",
    "lock_tenant_memories",
    "memory_title",
]

_MEMORY_COLUMNS = (
    "m.id, m.title, m.content, m.memory_type, m.tags, m.source, m.domain, m.metadata, "
    "m.created_at, m.valid_from, m.valid_to, m.document_id, m.recorded_at, m.superseded_at, "
    "m.occurred_at, m.speaker, m.speaker_role, m.user_id, m.agent_id, m.session_id"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Draft:
    """A memory as it is written, from the doors through the services to this insert (the
    services' ``MemoryDraft`` adds the relations given with it). Tags are stored once each, in
    order; no metadata is stored as ``{}``; ``role`` is the speaker's (``speaker_role``)."""

    content: str
    title: str | None = None
    memory_type: str = "semantic"
    tags: tuple[str, ...] = ()
    source: str | None = None
    domain: str | None = None
    metadata: dict[str, Any] | None = None
    # when it happened or was said (None: when it is stored), who said it, in which role
    occurred_at: datetime | None = None
    speaker: str | None = None
    role: str | None = None
    # scopes inside the tenant (None: shared); a user-bound token's writes get its user
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None


_DRAFT_FIELDS = tuple(f.name for f in fields(Draft))


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


# Memories, their chunks and their first jobs in one statement (one round trip, and the chunks'
# statement-level BM25 triggers run once for all of them, not once per memory or chunk). The
# memories travel as one JSON array (``i``, each with its position ``n``), the chunks as
# parallel arrays naming their memory's ``n``, the vectors as one flat real[] (binary, no text
# formatting) that each chunk slices; the column's assignment cast makes them vector or
# halfvec. A memory whose content a current memory already has writes nothing (no row from
# ``m``); the memories are written in order, so their ``created_at`` (clock_timestamp) is too.
_INSERT_MEMORIES = text(
    "WITH i AS (SELECT * FROM jsonb_to_recordset(CAST(:items AS jsonb)) AS x (n integer, "
    "title text, content text, memory_type text, tags text[], source text, domain text, "
    "metadata jsonb, sha256 text, document_id uuid, language text, content_language text, "
    "occurred_at timestamptz, speaker text, speaker_role text, user_id text, agent_id text, "
    "session_id text, states_time boolean)), "
    "m AS (INSERT INTO memories (tenant_id, title, content, memory_type, tags, source, domain, "
    "metadata, content_sha256, document_id, content_language, occurred_at, speaker, "
    "speaker_role, user_id, agent_id, session_id, states_time) SELECT :tenant, i.title, "
    "i.content, i.memory_type, i.tags, i.source, i.domain, i.metadata, decode(i.sha256, 'hex'), "
    "i.document_id, i.content_language, i.occurred_at, i.speaker, i.speaker_role, i.user_id, "
    "i.agent_id, i.session_id, i.states_time "
    "FROM i ORDER BY i.n "
    "ON CONFLICT (tenant_id, content_sha256) "
    "WHERE document_id IS NULL AND superseded_at IS NULL DO NOTHING "
    "RETURNING id, content_sha256), "
    "mi AS (SELECT i.n, i.title, i.language, i.user_id, m.id FROM m "
    "JOIN i ON decode(i.sha256, 'hex') = m.content_sha256), "
    "c AS (INSERT INTO chunks (tenant_id, memory_id, ordinal, content, context, language, "
    "embedding, kind, user_id) SELECT :tenant, mi.id, x.ordinal, x.content, "
    "coalesce(x.context, mi.title), CAST(mi.language AS regconfig), "
    "(CAST(:vectors AS real[]))[(x.g - 1) * :dim + 1 : x.g * :dim], x.kind, mi.user_id "
    "FROM unnest(CAST(:chunk_of AS integer[]), CAST(:ordinals AS integer[]), "
    "CAST(:contents AS text[]), CAST(:kinds AS text[]), CAST(:contexts AS text[])) "
    "WITH ORDINALITY AS x (n, ordinal, content, kind, context, g) JOIN mi ON mi.n = x.n "
    "RETURNING memory_id), "
    "j AS (INSERT INTO jobs (tenant_id, kind, payload) SELECT :tenant, :job_kind, "
    "jsonb_build_object('memory_id', CAST(mi.id AS text)) FROM mi ORDER BY mi.n "
    "RETURNING id, CAST(payload ->> 'memory_id' AS uuid) AS memory_id) "
    "SELECT mi.n, mi.id, j.id AS job_id, "
    "(SELECT count(*) FROM c WHERE c.memory_id = mi.id) AS chunks "
    "FROM mi JOIN j ON j.memory_id = mi.id"
)


@dataclass(frozen=True, slots=True)
class InsertedMemory:
    id: UUID
    chunks: int
    job_id: UUID


@dataclass(frozen=True, slots=True)
class MemoryToInsert:
    """A memory (``sha256``: its key, ``memories.content_sha256``; ``document_id``: the
    document whose text it holds) with its chunks (``contents`` and their ``embeddings``, one
    row each, and optional statement ``kinds``, see ``contract.limits.STATEMENT_KINDS``),
    indexed in the text-search configuration ``language``; ``content_language``: the language
    the content is written in (a configuration name; None when unsure); ``contexts``: each
    chunk's context (indexed with it; a conversation turn's earlier turns), where not given the
    title; ``states_time``: whether the content states a time (``recall.timeframe``: the time
    stage searches those for a "when" question; None: not known)."""

    memory: Draft
    sha256: bytes
    language: str
    contents: Sequence[str]
    embeddings: np.ndarray
    kinds: Sequence[str | None] = ()
    content_language: str | None = None
    contexts: Sequence[str | None] = ()
    document_id: UUID | None = None
    states_time: bool | None = None


async def insert_memory(
    conn: AsyncConnection, tenant_id: UUID, item: MemoryToInsert, *, job_kind: str
) -> InsertedMemory | None:
    """The memory, its chunks and a ``job_kind`` job for it; None when a current memory with
    the same content exists (a concurrent insert): nothing written."""
    return (await insert_memories(conn, tenant_id, [item], job_kind=job_kind))[0]


async def insert_memories(
    conn: AsyncConnection, tenant_id: UUID, items: Sequence[MemoryToInsert], *, job_kind: str
) -> list[InsertedMemory | None]:
    """``insert_memory`` for many in one statement, results in item order. The items' contents
    must differ (a repeat would get the first one's row)."""
    if not items:
        return []
    if len({item.sha256 for item in items}) != len(items):
        raise ValueError("memories inserted together must have distinct contents")
    rows = await conn.execute(
        _INSERT_MEMORIES, {"tenant": tenant_id, "job_kind": job_kind, **_statement_values(items)}
    )
    inserted = {row.n: InsertedMemory(row.id, int(row.chunks), row.job_id) for row in rows}
    return [inserted.get(n) for n in range(len(items))]


def _statement_values(items: Sequence[MemoryToInsert]) -> dict[str, Any]:
    """``_INSERT_MEMORIES``'s parameters apart from the tenant and the job kind."""
    rows: list[dict[str, Any]] = []
    chunk_of: list[int] = []
    ordinals: list[int] = []
    contents: list[str] = []
    kinds: list[str | None] = []
    contexts: list[str | None] = []
    vectors: list[np.ndarray] = []
    for n, item in enumerate(items):
        if len(item.embeddings) != len(item.contents):
            raise ValueError(f"{len(item.contents)} chunks but {len(item.embeddings)} embeddings")
        rows.append({"n": n} | _memory_values(item))
        count = len(item.contents)
        chunk_of += [n] * count
        ordinals += range(count)
        contents += item.contents
        kinds += [item.kinds[i] if i < len(item.kinds) else None for i in range(count)]
        contexts += [item.contexts[i] if i < len(item.contexts) else None for i in range(count)]
        vectors.append(np.ascontiguousarray(item.embeddings, dtype=np.float32))
    flat = np.concatenate(vectors)
    return {
        "items": msgspec.json.encode(rows).decode(),
        "chunk_of": chunk_of,
        "ordinals": ordinals,
        "contents": contents,
        "kinds": kinds,
        "contexts": contexts,
        "vectors": flat.ravel().tolist(),
        "dim": flat.shape[1],
    }


def _memory_values(item: MemoryToInsert) -> dict[str, Any]:
    """The item's memory row, as ``_INSERT_MEMORIES`` reads it from ``:items``."""
    draft = item.memory
    values = {name: getattr(draft, name) for name in _DRAFT_FIELDS}
    values["tags"] = list(dict.fromkeys(draft.tags))
    values["metadata"] = draft.metadata or {}
    values["speaker_role"] = values.pop("role")
    return values | {
        "sha256": item.sha256.hex(),
        "document_id": str(item.document_id) if item.document_id else None,
        "language": item.language,
        "content_language": item.content_language,
        "states_time": item.states_time,
    }


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
    filters: MemoryFilters | None = None,
) -> list[MemoryRow]:
    """Newest first; ``after`` is the (created_at, id) of the last row of the previous page;
    ``filters``: their scopes and event time (``MemoryFilters.scope_sql``)."""
    scope, params = filters.scope_sql() if filters else ("", {})
    where = "m.tenant_id = :tenant" + scope
    params |= {"tenant": tenant_id, "limit": limit}
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


async def hold_memory(conn: AsyncConnection, tenant_id: UUID, memory_id: UUID) -> bool:
    """Whether the memory still exists, held (``FOR SHARE``) until the transaction ends: a
    deletion (which locks it first: ``lock_memories``) waits, or has already removed it."""
    held = await conn.scalar(
        text("SELECT 1 FROM memories WHERE tenant_id = :t AND id = :m FOR SHARE"),
        {"t": tenant_id, "m": memory_id},
    )
    return held is not None


async def lock_memories(conn: AsyncConnection, tenant_id: UUID, memory_ids: Sequence[UUID]) -> None:
    """Lock the memories and then their chunks (``FOR UPDATE``, each in id order) before
    anything of theirs is deleted.

    Every deletion takes the memory first, as the extraction job does (``hold_memory``), and
    the chunks in the order a sentence-vector write locks them (``set_sentence_vectors``): a
    deletion that removed the chunks first and then waited for a memory held by a running
    extraction, while that extraction waited to write for one of those chunks, deadlocked."""
    params = {"t": tenant_id, "ids": list(memory_ids)}
    await conn.execute(
        text(
            "SELECT id FROM memories WHERE tenant_id = :t AND id = ANY(:ids) ORDER BY id FOR UPDATE"
        ),
        params,
    )
    await conn.execute(
        text(
            "SELECT id FROM chunks WHERE tenant_id = :t AND memory_id = ANY(:ids) "
            "ORDER BY id FOR UPDATE"
        ),
        params,
    )


async def lock_tenant_memories(conn: AsyncConnection, tenant_id: UUID) -> None:
    """``lock_memories`` for all of a tenant's memories (before the tenant is erased)."""
    for table in ("memories", "chunks"):
        await conn.execute(
            text(f"SELECT id FROM {table} WHERE tenant_id = :t ORDER BY id FOR UPDATE"),
            {"t": tenant_id},
        )


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
