"""Statements behind the relation-path stage: one hop of typed entity edges out of a frontier,
the memories that state a pair of entities' relation, and the answer entities' profiles."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from knowmind.store.search import MemoryFilters
from knowmind.store.sql import Conn, fetch

__all__ = ["PathEdge", "co_mentioning", "hop_edges", "titled_memories"]


@dataclass(frozen=True, slots=True)
class PathEdge:
    """``from_id -predicate-> to_id`` (``reversed``: stored the other way round, with no twin)
    and the memory whose inline relation drew it, if any."""

    from_id: UUID
    to_id: UUID
    predicate: str
    memory_id: UUID | None
    name: str  # of ``to_id``
    entity_class: str
    reversed: bool = False


def _edge_time(filters: MemoryFilters) -> tuple[str, dict[str, Any]]:
    """Clauses on the edge alias ``e``: current edges, or those valid (and recorded) at the
    filters' instants, as ``MemoryFilters.sql`` reads them for memories."""
    as_of = filters.as_of or filters.known_at
    if as_of is None:
        clause, params = "e.valid_to IS NULL", {}
    else:
        clause = "e.valid_from <= :p_as_of AND (e.valid_to IS NULL OR e.valid_to > :p_as_of)"
        params = {"p_as_of": as_of}
    if filters.known_at is not None:
        clause += (
            " AND e.recorded_at <= :p_known_at"
            " AND (e.superseded_at IS NULL OR e.superseded_at > :p_known_at)"
        )
        params["p_known_at"] = filters.known_at
    return clause, params


def _stated_within(filters: MemoryFilters) -> tuple[str, dict[str, Any]]:
    """An edge drawn by a memory counts only while that memory passes the filters (an edge
    linked by hand, with no stating memory, always counts)."""
    where, params = filters.sql()
    clause = (
        "(NOT e.properties ? 'source_memory_id' OR EXISTS (SELECT 1 FROM memories m "
        "WHERE m.tenant_id = e.tenant_id "
        f"AND m.id = CAST(e.properties->>'source_memory_id' AS uuid){where}))"
    )
    return clause, params


async def hop_edges(
    conn: Conn,
    tenant_id: UUID,
    frontier: list[UUID],
    wanted: list[str],
    filters: MemoryFilters,
    *,
    per_node: int,
    limit: int,
) -> list[PathEdge]:
    """The entity edges out of each frontier node (and, reversed, the edges into it that have
    no twin to walk), at most ``per_node`` per node and ``limit`` in all, the ``wanted``
    predicates first; derived edges are left out (no memory states them)."""
    if not frontier:
        return []
    time, time_params = _edge_time(filters)
    stated, stated_params = _stated_within(filters)
    rows = await fetch(
        conn,
        (
            "SELECT f.id AS from_id, x.to_id, x.predicate, x.memory_id, t.name, "
            "t.entity_class, x.reversed FROM unnest(CAST(:frontier AS uuid[])) AS f(id) "
            "CROSS JOIN LATERAL ("
            " SELECT to_id, predicate, memory_id, reversed FROM ("
            "  SELECT e.to_id, e.predicate, e.properties->>'source_memory_id' AS memory_id, "
            "  false AS reversed, e.confidence, e.id FROM edges e "
            "  WHERE e.tenant_id = :tenant AND e.from_id = f.id AND e.to_kind = 'entity' "
            f"  AND NOT e.derived AND {time} AND {stated}"
            "  UNION ALL"
            "  SELECT e.from_id, e.predicate, e.properties->>'source_memory_id', true, "
            "  e.confidence, e.id FROM edges e "
            "  WHERE e.tenant_id = :tenant AND e.to_id = f.id AND e.from_kind = 'entity' "
            f"  AND e.inverse_id IS NULL AND e.from_id <> f.id AND NOT e.derived AND {time} "
            f"  AND {stated}"
            " ) AS a ORDER BY predicate = ANY(:wanted) DESC, confidence DESC, id LIMIT :per_node"
            ") AS x JOIN entities t ON t.tenant_id = :tenant AND t.id = x.to_id "
            "LIMIT :limit"
        ),
        {
            "tenant": tenant_id,
            "frontier": frontier,
            "wanted": wanted,
            "per_node": per_node,
            "limit": limit,
            **time_params,
            **stated_params,
        },
    )
    return [
        PathEdge(
            r["from_id"],
            r["to_id"],
            r["predicate"],
            UUID(r["memory_id"]) if r["memory_id"] else None,
            r["name"],
            r["entity_class"],
            r["reversed"],
        )
        for r in rows
    ]


async def co_mentioning(
    conn: Conn, tenant_id: UUID, pairs: list[tuple[UUID, UUID]], filters: MemoryFilters
) -> dict[tuple[UUID, UUID], list[UUID]]:
    """{(a, b): memories whose inline relations name both a and b}, for edges drawn without
    a stating memory (linked by hand), newest first."""
    if not pairs:
        return {}
    where, params = filters.sql()
    rows = await fetch(
        conn,
        (
            "SELECT p.a, p.b, m.id FROM unnest(CAST(:a AS uuid[]), CAST(:b AS uuid[])) "
            "AS p(a, b) JOIN mentions x ON x.tenant_id = :tenant AND x.entity_id = p.a "
            "AND x.method = 'inline' JOIN mentions y ON y.tenant_id = :tenant "
            "AND y.memory_id = x.memory_id AND y.entity_id = p.b AND y.method = 'inline' "
            f"JOIN memories m ON m.tenant_id = :tenant AND m.id = x.memory_id WHERE true{where} "
            "ORDER BY m.created_at DESC"
        ),
        {"tenant": tenant_id, "a": [a for a, _ in pairs], "b": [b for _, b in pairs], **params},
    )
    found: dict[tuple[UUID, UUID], list[UUID]] = {}
    for r in rows:
        found.setdefault((r[0], r[1]), []).append(r[2])
    return found


async def titled_memories(
    conn: Conn, tenant_id: UUID, entity_ids: list[UUID], filters: MemoryFilters, limit: int
) -> list[tuple[UUID, UUID]]:
    """(entity id, memory id) of the entities' profiles: memories that mention an entity and
    carry its name as their title (case aside)."""
    if not entity_ids:
        return []
    where, params = filters.sql()
    rows = await fetch(
        conn,
        (
            "SELECT DISTINCT n.entity_id, m.id FROM mentions n "
            "JOIN entities t ON t.tenant_id = n.tenant_id AND t.id = n.entity_id "
            "JOIN memories m ON m.tenant_id = n.tenant_id AND m.id = n.memory_id "
            "WHERE n.tenant_id = :tenant AND n.entity_id = ANY(:ids) "
            f"AND lower(m.title) = lower(t.name){where} LIMIT :limit"
        ),
        {"tenant": tenant_id, "ids": entity_ids, "limit": limit, **params},
    )
    return [(r[0], r[1]) for r in rows]
