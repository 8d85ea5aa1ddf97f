"""Statements behind facts that update themselves (``"single_valued"`` predicates): a subject's
current edges of one predicate, closing an edge with its twin, whether a memory still states a
current fact, closing a memory's validity, and what a memory's history is read from."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.scalars import dict_rows

__all__ = [
    "CurrentFact",
    "close_edge",
    "close_memory",
    "current_facts",
    "entity_names",
    "fact_audit_entries",
    "memory_valid_from",
    "states_current_fact",
    "supersedes_edges",
]


@dataclass(frozen=True, slots=True)
class CurrentFact:
    """A current edge ``subject -predicate-> object_id`` and the memory that stated it."""

    id: UUID
    inverse_id: UUID | None
    object_id: UUID
    valid_from: datetime
    memory_id: UUID | None


async def current_facts(
    conn: AsyncConnection, tenant_id: UUID, subject_id: UUID, predicate: str
) -> list[CurrentFact]:
    """The subject's current (drawn, not derived) edges of the predicate, oldest first."""
    rows = await conn.execute(
        text(
            "SELECT id, inverse_id, to_id, valid_from, properties->>'source_memory_id' AS memory "
            "FROM edges WHERE tenant_id = :t AND from_id = :s AND predicate = :p "
            "AND valid_to IS NULL AND NOT derived ORDER BY valid_from, id"
        ),
        {"t": tenant_id, "s": subject_id, "p": predicate},
    )
    return [CurrentFact(r.id, r.inverse_id, r.to_id, r.valid_from, _uuid(r.memory)) for r in rows]


async def close_edge(
    conn: AsyncConnection, tenant_id: UUID, fact: CurrentFact, at: datetime
) -> None:
    """The edge and its twin hold until ``at`` (valid time; never before they began) and are
    no longer the current record (transaction time: now)."""
    await conn.execute(
        text(
            "UPDATE edges SET valid_to = greatest(CAST(:at AS timestamptz), valid_from), "
            "superseded_at = now() WHERE tenant_id = :t AND id = ANY(:ids) AND valid_to IS NULL"
        ),
        {"t": tenant_id, "ids": [i for i in (fact.id, fact.inverse_id) if i], "at": at},
    )


async def memory_valid_from(
    conn: AsyncConnection, tenant_id: UUID, memory_id: UUID
) -> datetime | None:
    """Since when the memory holds: the instant the facts it states hold from."""
    found: datetime | None = await conn.scalar(
        text("SELECT valid_from FROM memories WHERE tenant_id = :t AND id = :m"),
        {"t": tenant_id, "m": memory_id},
    )
    return found


async def states_current_fact(conn: AsyncConnection, tenant_id: UUID, memory_id: UUID) -> bool:
    """Whether an edge the memory's relations drew still holds."""
    found = await conn.scalar(
        text(
            "SELECT EXISTS (SELECT 1 FROM edges WHERE tenant_id = :t "
            "AND properties->>'source_memory_id' = :m AND valid_to IS NULL)"
        ),
        {"t": tenant_id, "m": str(memory_id)},
    )
    return bool(found)


async def close_memory(
    conn: AsyncConnection, tenant_id: UUID, memory_id: UUID, at: datetime
) -> bool:
    """End a current standalone memory's validity at ``at`` (not before it began) and its
    transaction time now, as ``update_fact`` does; a document's memory is left as it is (its
    text holds more than the facts drawn from it). False when nothing was closed."""
    closed = await conn.scalar(
        text(
            "UPDATE memories SET valid_to = greatest(CAST(:at AS timestamptz), valid_from), "
            "superseded_at = now() WHERE tenant_id = :t AND id = :m AND document_id IS NULL "
            "AND superseded_at IS NULL AND (valid_to IS NULL OR valid_to > :at) RETURNING id"
        ),
        {"t": tenant_id, "m": memory_id, "at": at},
    )
    return closed is not None


async def fact_audit_entries(
    conn: AsyncConnection, tenant_id: UUID, memory_id: UUID, action: str
) -> list[dict[str, Any]]:
    """The tenant's audit entries of ``action`` that name the memory, oldest first."""
    return await dict_rows(
        conn,
        text(
            "SELECT id, at, actor, detail FROM audit_log WHERE tenant_id = :t "
            "AND targets @> ARRAY[CAST(:m AS text)] AND action = :a ORDER BY id"
        ),
        {"t": tenant_id, "m": str(memory_id), "a": action},
    )


async def supersedes_edges(
    conn: AsyncConnection, tenant_id: UUID, memory_id: UUID
) -> list[dict[str, Any]]:
    """The memory's ``SUPERSEDES`` edges, either way: (new, old, created_at, properties)."""
    return await dict_rows(
        conn,
        text(
            "SELECT from_id AS new_id, to_id AS old_id, created_at, properties FROM edges "
            "WHERE tenant_id = :t AND predicate = 'SUPERSEDES' AND (from_id = :m OR to_id = :m) "
            "ORDER BY created_at, id"
        ),
        {"t": tenant_id, "m": memory_id},
    )


async def entity_names(
    conn: AsyncConnection, tenant_id: UUID, ids: Sequence[UUID]
) -> dict[UUID, tuple[str, str]]:
    """{id: (name, class)} of the entities that still exist."""
    if not ids:
        return {}
    rows = await conn.execute(
        text("SELECT id, name, entity_class FROM entities WHERE tenant_id = :t AND id = ANY(:i)"),
        {"t": tenant_id, "i": list(ids)},
    )
    return {r.id: (r.name, r.entity_class) for r in rows}


def _uuid(value: str | None) -> UUID | None:
    try:
        return UUID(value) if value else None
    except ValueError:
        return None
