"""Erasure: remove every trace of memories (or a whole tenant) and count what went."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.db.engine import take_tenant_write_lock
from knowmind.store.memories import lock_memories, lock_tenant_memories

__all__ = [
    "TENANT_TABLES",
    "delete_tenant",
    "erase_conversations",
    "erase_memories",
    "erase_orphan_entities",
    "tenant_row_counts",
    "user_memory_ids",
    "user_token_ids",
]

# Every table that holds tenant data, in an order that respects foreign keys on delete.
TENANT_TABLES = (
    "conversation_turns",
    "conversations",
    "job_parts",
    "jobs",
    "mentions",
    "chunk_terms",
    "chunk_sentences",
    "summary_nodes",
    "bm25_lexemes",
    "bm25_corpus",
    "edges",
    "chunks",
    "memories",
    "documents",
    "entity_names",
    "entities",
    "ontology_predicates",
    "ontology_classes",
    "api_tokens",
    "graph_outbox",
)


async def _count_deleted(conn: AsyncConnection, sql: str, params: dict[str, Any]) -> int:
    return len((await conn.execute(text(sql + " RETURNING 1"), params)).all())


_TOUCHED_ENTITIES = text(
    "SELECT entity_id FROM mentions WHERE tenant_id = :t AND memory_id = ANY(:ids) "
    "UNION SELECT to_id FROM edges WHERE tenant_id = :t AND to_kind = 'entity' "
    "AND (from_id = ANY(:ids) OR properties->>'source_memory_id' = ANY(:sids)) "
    "UNION SELECT from_id FROM edges WHERE tenant_id = :t "
    "AND from_kind = 'entity' AND (to_id = ANY(:ids) "
    "OR properties->>'source_memory_id' = ANY(:sids))"
)
_DELETE_EDGES = text(
    "DELETE FROM edges WHERE tenant_id = :t AND (from_id = ANY(:ids) "
    "OR to_id = ANY(:ids) OR properties->>'source_memory_id' = ANY(:sids)) "
    "RETURNING predicate"
)
_DELETE_JOBS = text(
    "DELETE FROM jobs WHERE tenant_id = :t AND (payload->>'memory_id' = ANY(:sids) "
    "OR result->>'memory_id' = ANY(:sids) "
    "OR payload->>'document_id' = ANY(:dids) "
    "OR payload->>'replace_document_id' = ANY(:dids) "
    "OR result->>'document_id' = ANY(:dids)) RETURNING id"
)


async def erase_memories(
    conn: AsyncConnection,
    tenant_id: UUID,
    memory_ids: list[UUID],
    document_ids: Sequence[UUID] = (),
) -> tuple[dict[str, int], set[UUID], set[str], list[UUID]]:
    """Delete the memories with their chunks (text, vectors, tsvectors), mentions, edges
    (including edges their inline relations drew) and jobs (those of ``document_ids`` too:
    a queued upload replacing one, its summary tree). Returns the counts, the entities they
    referenced (candidates for removal), the edge predicates removed and the ids of the jobs
    deleted (a worker running one of them must stop it)."""
    params = {
        "t": tenant_id,
        "ids": memory_ids,
        "sids": [str(m) for m in memory_ids],
        "dids": [str(d) for d in document_ids],
    }
    # Lock first: an extraction running concurrently must not add mentions (or entities)
    # after we looked; its inserts wait for this transaction and then fail on the gone rows.
    await lock_memories(conn, tenant_id, memory_ids)
    touched = set((await conn.execute(_TOUCHED_ENTITIES, params)).scalars())
    removed = list((await conn.execute(_DELETE_EDGES, params)).scalars())
    job_ids = list((await conn.execute(_DELETE_JOBS, params)).scalars())
    counts = {"edges": len(removed), "jobs": len(job_ids)}
    for table, column in (("mentions", "memory_id"), ("chunks", "memory_id"), ("memories", "id")):
        counts[table] = await _count_deleted(
            conn, f"DELETE FROM {table} WHERE tenant_id = :t AND {column} = ANY(:ids)", params
        )
    return counts, touched, set(removed), job_ids


async def user_memory_ids(conn: AsyncConnection, tenant_id: UUID, user_id: str) -> list[UUID]:
    """The ids of one end user's memories (current, superseded and closed alike)."""
    rows = await conn.execute(
        text("SELECT id FROM memories WHERE tenant_id = :t AND user_id = :u ORDER BY id"),
        {"t": tenant_id, "u": user_id},
    )
    return list(rows.scalars())


async def user_token_ids(conn: AsyncConnection, tenant_id: UUID, user_id: str) -> list[UUID]:
    """The tokens bound to one end user (revoked ones too); the owner's connection reads
    them (the app role cannot read api_tokens)."""
    rows = await conn.execute(
        text("SELECT id FROM api_tokens WHERE tenant_id = :t AND user_id = :u"),
        {"t": tenant_id, "u": user_id},
    )
    return list(rows.scalars())


async def erase_conversations(
    conn: AsyncConnection, tenant_id: UUID, owner_tokens: Sequence[UUID]
) -> int:
    """The answer threads these tokens started, with their turns; how many went."""
    if not owner_tokens:
        return 0
    return await _count_deleted(
        conn,
        "DELETE FROM conversations WHERE tenant_id = :t AND owner_token = ANY(:ids)",
        {"t": tenant_id, "ids": list(owner_tokens)},
    )


async def erase_orphan_entities(
    conn: AsyncConnection, tenant_id: UUID, candidates: set[UUID]
) -> tuple[int, int]:
    """Remove entities that only erased data referred to: made from memory text (not through
    the entities API) and now without mentions or hand-made edges. Returns (entities, edges)."""
    if not candidates:
        return 0, 0
    params: dict[str, Any] = {"t": tenant_id, "ids": sorted(candidates)}
    # Locked before they are checked, in id order (as ``edges.insert_mentions`` takes them): a
    # mention another transaction has just written holds its entity until that commits, and the
    # check, a statement of its own, then sees it; one written later waits for this erasure and
    # fails on the foreign key (its job retries). Checked without the lock, an entity a running
    # extraction had just linked to another memory looked orphaned, and its deletion's cascade
    # took that memory's mention with it.
    params["ids"] = list(
        (
            await conn.execute(
                text(
                    "SELECT id FROM entities WHERE tenant_id = :t AND id = ANY(:ids) "
                    "AND origin <> 'api' ORDER BY id FOR UPDATE"
                ),
                params,
            )
        ).scalars()
    )
    orphans = list(
        (
            await conn.execute(
                text(
                    "SELECT e.id FROM entities e WHERE e.tenant_id = :t AND e.id = ANY(:ids) "
                    "AND e.origin <> 'api' AND NOT EXISTS (SELECT 1 FROM mentions m "
                    "WHERE m.tenant_id = :t AND m.entity_id = e.id) AND NOT EXISTS "
                    "(SELECT 1 FROM edges g WHERE g.tenant_id = :t AND NOT g.derived "
                    "AND (g.from_id = e.id OR g.to_id = e.id))"
                ),
                params,
            )
        ).scalars()
    )
    params["ids"] = orphans
    edges = await _count_deleted(
        conn,
        "DELETE FROM edges WHERE tenant_id = :t AND (from_id = ANY(:ids) OR to_id = ANY(:ids))",
        params,
    )
    entities = await _count_deleted(
        conn, "DELETE FROM entities WHERE tenant_id = :t AND id = ANY(:ids)", params
    )
    return entities, edges


async def tenant_row_counts(conn: AsyncConnection, tenant_id: UUID) -> dict[str, int]:
    counts = {}
    for table in TENANT_TABLES:
        counts[table] = int(
            await conn.scalar(
                text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"), {"t": tenant_id}
            )
        )
    return counts


async def delete_tenant(conn: AsyncConnection, tenant_id: UUID) -> None:
    """The tenant row; its data goes with it (foreign keys ``ON DELETE CASCADE``).

    Locked first as every write of the tenant is (its write lock, then its memories and their
    chunks): the cascade alone would take the tenant row before the memory rows, the reverse
    of a running extraction step (it holds its memory, then needs the tenant row for a new
    entity's foreign key), and the two would deadlock."""
    await take_tenant_write_lock(conn, tenant_id)
    await lock_tenant_memories(conn, tenant_id)
    await conn.execute(text("DELETE FROM tenants WHERE id = :t"), {"t": tenant_id})
