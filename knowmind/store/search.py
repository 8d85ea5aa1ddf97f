"""Candidate queries behind the recall stages, and the lookup of the chunks finally shown."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from knowmind.errors import InvalidInputError
from knowmind.store.rows import ChunkHit
from knowmind.store.sql import Conn, fetch

__all__ = [
    "MemoryFilters",
    "chunk_windows",
    "connected_entities",
    "fetch_chunks",
    "first_chunks",
    "memories_mentioning",
    "utc_instant",
]


#: Filters that keep the memories whose column equals the value.
_EQUAL_COLUMNS = (
    "memory_type",
    "source",
    "domain",
    "document_id",
    "speaker",
    "user_id",
    "agent_id",
    "session_id",
)


@dataclass(frozen=True, slots=True)
class MemoryFilters:
    """What a recall may return. Time: by default only memories valid now; ``as_of`` gives
    what was valid at that instant (valid time), ``known_at`` what the store held then
    (transaction time)."""

    memory_type: str | None = None
    tags: list[str] = field(default_factory=list)
    source: str | None = None
    domain: str | None = None
    document_id: UUID | None = None
    as_of: datetime | None = None
    known_at: datetime | None = None
    # scopes inside the tenant (a memory of exactly this user, agent, session) and the event
    # time: occurred_after <= occurred_at < occurred_before
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    speaker: str | None = None  # who said it (lists; exact)
    # only memories whose text states a time (the time stage's search for a "when" question)
    states_time: bool = False

    def __post_init__(self) -> None:
        for name in ("as_of", "known_at", "occurred_after", "occurred_before"):
            moment = getattr(self, name)
            if moment is not None:
                object.__setattr__(self, name, utc_instant(moment, name))

    def sql(self) -> tuple[str, dict[str, Any]]:
        """AND-clauses on the memories alias ``m`` and their parameters."""
        clauses: list[str] = []
        params: dict[str, Any] = {}
        as_of = self.as_of or self.known_at  # "what we knew then" is about what was true then
        if as_of is None:
            clauses.append("(m.valid_to IS NULL OR m.valid_to > now())")
        else:
            clauses.append(
                "m.valid_from <= :f_as_of AND (m.valid_to IS NULL OR m.valid_to > :f_as_of)"
            )
            params["f_as_of"] = as_of
        if self.known_at is not None:
            clauses.append(
                "m.recorded_at <= :f_known_at "
                "AND (m.superseded_at IS NULL OR m.superseded_at > :f_known_at)"
            )
            params["f_known_at"] = self.known_at
        scope, scope_params = self.scope_sql()
        return "".join(f" AND {c}" for c in clauses) + scope, params | scope_params

    def scope_sql(self) -> tuple[str, dict[str, Any]]:
        """AND-clauses of what a memory is (type, source, tags, speaker), its scopes and its
        event time, without the validity ones (lists and exports show every memory, current
        or not), on the memories alias ``m``."""
        clauses: list[str] = []
        params: dict[str, Any] = {}
        if self.tags:
            clauses.append("m.tags @> CAST(:f_tags AS text[])")
            params["f_tags"] = self.tags
        for column in _EQUAL_COLUMNS:
            value = getattr(self, column)
            if value is not None:
                clauses.append(f"m.{column} = :f_{column}")
                params[f"f_{column}"] = value
        if self.occurred_after is not None:
            clauses.append("m.occurred_at >= :f_occurred_after")
            params["f_occurred_after"] = self.occurred_after
        if self.occurred_before is not None:
            clauses.append("m.occurred_at < :f_occurred_before")
            params["f_occurred_before"] = self.occurred_before
        if self.states_time:
            clauses.append("m.states_time")
        return "".join(f" AND {c}" for c in clauses), params


def utc_instant(moment: datetime, name: str) -> datetime:
    """One rule for every caller (REST, MCP): a time without a zone is UTC, and it must be an
    instant the database can hold (year 1 to 9999 in UTC: "9999-12-31T23:59-14:00" is in year
    10000 there); 422 naming ``name`` otherwise."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise InvalidInputError(name, "outside the years 1 to 9999 in UTC") from None


async def fetch_chunks(conn: Conn, tenant_id: UUID, chunk_ids: list[UUID]) -> dict[UUID, ChunkHit]:
    if not chunk_ids:
        return {}
    rows = await fetch(
        conn,
        (
            "SELECT c.id AS chunk_id, c.memory_id, c.content, m.title, m.source, m.memory_type, "
            "m.created_at, c.kind, m.occurred_at, m.speaker, m.speaker_role FROM chunks c "
            "JOIN memories m "
            "ON m.tenant_id = c.tenant_id AND m.id = c.memory_id "
            "WHERE c.tenant_id = :tenant AND c.id = ANY(:ids)"
        ),
        {"tenant": tenant_id, "ids": chunk_ids},
    )
    return {r[0]: ChunkHit(**r) for r in rows}


async def chunk_windows(
    conn: Conn, tenant_id: UUID, chunk_ids: list[UUID], reach: int = 1
) -> dict[UUID, str]:
    """{chunk id: its text with the ``reach`` chunks before and after it in its memory}, for
    small-to-big context; statement chunks (tagged) are not part of a document's flow."""
    if not chunk_ids:
        return {}
    rows = await fetch(
        conn,
        (
            "SELECT c.id, string_agg(n.content, E'\n' ORDER BY n.ordinal) FROM chunks c "
            "JOIN chunks n ON n.tenant_id = c.tenant_id AND n.memory_id = c.memory_id "
            "AND n.ordinal BETWEEN c.ordinal - :reach AND c.ordinal + :reach "
            "AND (n.id = c.id OR (c.kind IS NULL AND n.kind IS NULL)) "
            "WHERE c.tenant_id = :tenant AND c.id = ANY(:ids) GROUP BY c.id"
        ),
        {"tenant": tenant_id, "ids": chunk_ids, "reach": reach},
    )
    return {r[0]: r[1] for r in rows}


async def first_chunks(
    conn: Conn, tenant_id: UUID, memory_ids: list[UUID], filters: MemoryFilters
) -> dict[UUID, UUID]:
    """{memory id: its first chunk} for the memories that pass the filters."""
    if not memory_ids:
        return {}
    where, params = filters.sql()
    rows = await fetch(
        conn,
        (
            "SELECT DISTINCT ON (c.memory_id) c.memory_id, c.id FROM chunks c "
            "JOIN memories m ON m.tenant_id = c.tenant_id AND m.id = c.memory_id "
            f"WHERE c.tenant_id = :tenant AND c.memory_id = ANY(:ids){where} "
            "ORDER BY c.memory_id, c.ordinal"
        ),
        {"tenant": tenant_id, "ids": memory_ids, **params},
    )
    return {r[0]: r[1] for r in rows}


async def memories_mentioning(
    conn: Conn,
    tenant_id: UUID,
    entity_ids: list[UUID],
    filters: MemoryFilters,
    limit: int,
) -> list[dict[str, Any]]:
    """Memories that mention (or are linked by an edge to) the entities, with what ranks them:
    how the mention was found (inline < gazetteer < ner), where, and the memory's title."""
    if not entity_ids:
        return []
    where, params = filters.sql()
    rows = await fetch(
        conn,
        (
            "WITH hits AS ("
            " SELECT memory_id, entity_id, CASE method WHEN 'inline' THEN 0 "
            " WHEN 'gazetteer' THEN 1 ELSE 2 END AS method_rank, "
            " coalesce(start_offset, 0) AS first_offset FROM mentions "
            " WHERE tenant_id = :tenant AND entity_id = ANY(:ids)"
            " UNION ALL SELECT from_id, to_id, 0, 0 FROM edges WHERE tenant_id = :tenant "
            " AND from_kind = 'memory' AND to_id = ANY(:ids) AND valid_to IS NULL)"
            " SELECT h.memory_id, h.entity_id, min(h.method_rank) AS method_rank, "
            " min(h.first_offset) AS first_offset, m.title, m.created_at "
            " FROM hits h JOIN memories m ON m.tenant_id = :tenant AND m.id = h.memory_id "
            f" WHERE true{where} GROUP BY h.memory_id, h.entity_id, m.title, m.created_at "
            " ORDER BY min(h.method_rank), min(h.first_offset), m.created_at DESC LIMIT :limit"
        ),
        {"tenant": tenant_id, "ids": entity_ids, "limit": limit, **params},
    )
    return [dict(r) for r in rows]


async def connected_entities(
    conn: Conn,
    tenant_id: UUID,
    entity_id: UUID,
    *,
    predicates: list[str] | None = None,
    direction: str | None = None,
    entity_class: str | None = None,
) -> list[tuple[UUID, str]]:
    """(id, name) of entities one typed edge away from ``entity_id``; ``direction`` 'out':
    X -p-> node, 'in': node -p-> X (derived edges included)."""
    clauses: list[str] = []
    params: dict[str, Any] = {"tenant": tenant_id, "x": entity_id}
    if direction in (None, "out"):
        clauses.append(
            "SELECT to_id AS node, predicate FROM edges WHERE tenant_id = :tenant "
            "AND from_id = :x AND to_kind = 'entity' AND valid_to IS NULL"
        )
    if direction in (None, "in"):
        clauses.append(
            "SELECT from_id AS node, predicate FROM edges WHERE tenant_id = :tenant "
            "AND to_id = :x AND from_kind = 'entity' AND valid_to IS NULL"
        )
    filters = ""
    if predicates:
        filters += " AND n.predicate = ANY(:predicates)"
        params["predicates"] = predicates
    if entity_class:
        filters += " AND e.entity_class = :cls"
        params["cls"] = entity_class
    rows = await fetch(
        conn,
        (
            f"SELECT DISTINCT e.id, e.name FROM ({' UNION ALL '.join(clauses)}) AS n "
            "JOIN entities e ON e.tenant_id = :tenant AND e.id = n.node "
            f"WHERE true{filters} ORDER BY e.name"
        ),
        params,
    )
    return [(r[0], r[1]) for r in rows]
