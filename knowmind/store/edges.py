"""Graph edges, node lookups, mentions and derived-edge recomputation (tenant transaction)."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from asyncpg.pgproto.pgproto import UUID as PgUUID  # type: ignore[import-untyped]
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.db.engine import take_tenant_write_lock
from knowmind.db.tenant_scope import user_of
from knowmind.store.scalars import dict_rows, maybe_id, one_id
from knowmind.store.sql import Conn, fetch, fetchrow

__all__ = [
    "TextLink",
    "delete_edge_pair",
    "delete_node_edges",
    "insert_edge",
    "insert_mentions",
    "lock_tenant_graph",
    "node_kinds",
    "node_relations",
    "recompute_derived",
    "set_inverse",
    "uuid_from_text",
]


async def lock_tenant_graph(conn: AsyncConnection, tenant_id: UUID) -> None:
    """Serialise a tenant's graph writes so derived edges are computed from a complete view."""
    await take_tenant_write_lock(conn, tenant_id)


async def node_kinds(
    conn: AsyncConnection, tenant_id: UUID, ids: Sequence[UUID]
) -> dict[UUID, tuple[str, str | None]]:
    """{id: (kind, entity class or None for memories)} for the ids that exist."""
    rows = await conn.execute(
        text(
            "SELECT id, 'entity' AS kind, entity_class FROM entities "
            "WHERE tenant_id = :t AND id = ANY(:ids) "
            "UNION ALL SELECT id, 'memory', NULL FROM memories "
            "WHERE tenant_id = :t AND id = ANY(:ids)"
        ),
        {"t": tenant_id, "ids": list(ids)},
    )
    return {r.id: (r.kind, r.entity_class) for r in rows}


async def insert_edge(
    conn: AsyncConnection,
    tenant_id: UUID,
    *,
    from_id: UUID,
    from_kind: str,
    to_id: UUID,
    to_kind: str,
    predicate: str,
    confidence: float,
    properties: dict[str, Any] | None = None,
    derived: bool = False,
    valid_from: datetime | None = None,
) -> UUID:
    """Idempotent: an existing current edge keeps its id (and its ``valid_from``; its
    confidence is updated if it changed). A closed edge of the same triple stays closed: the
    fact holding again is a new edge. ``valid_from``: since when the fact holds (now if None)."""
    params = {
        "t": tenant_id,
        "f": from_id,
        "fk": from_kind,
        "to": to_id,
        "tk": to_kind,
        "p": predicate,
        "c": confidence,
        "props": properties or {},
        "d": derived,
        "vf": valid_from,
    }
    edge_id = await maybe_id(
        conn,
        text(
            "INSERT INTO edges AS e (tenant_id, from_id, from_kind, to_id, to_kind, predicate, "
            "confidence, properties, derived, valid_from) VALUES (:t, :f, :fk, :to, :tk, :p, "
            ":c, CAST(:props AS jsonb), :d, coalesce(CAST(:vf AS timestamptz), now())) "
            "ON CONFLICT (tenant_id, from_id, predicate, to_id) WHERE valid_to IS NULL "
            "DO UPDATE SET confidence = EXCLUDED.confidence "
            "WHERE e.confidence IS DISTINCT FROM EXCLUDED.confidence RETURNING id"
        ),
        {**params, "props": json.dumps(params["props"])},
    )
    if edge_id is None:
        edge_id = await one_id(
            conn,
            text(
                "SELECT id FROM edges WHERE tenant_id = :t AND from_id = :f AND predicate = :p "
                "AND to_id = :to AND valid_to IS NULL"
            ),
            params,
        )
    return edge_id


async def set_inverse(conn: AsyncConnection, tenant_id: UUID, a: UUID, b: UUID) -> None:
    await conn.execute(
        text(
            "UPDATE edges SET inverse_id = CASE id WHEN :a THEN CAST(:b AS uuid) ELSE :a END "
            "WHERE tenant_id = :t AND id IN (:a, :b) AND inverse_id IS DISTINCT FROM "
            "CASE id WHEN :a THEN CAST(:b AS uuid) ELSE :a END"
        ),
        {"t": tenant_id, "a": a, "b": b},
    )


async def delete_edge_pair(
    conn: AsyncConnection,
    tenant_id: UUID,
    from_id: UUID,
    predicate: str,
    to_id: UUID,
    twin: str | None,
) -> int:
    result = await conn.execute(
        text(
            "DELETE FROM edges WHERE tenant_id = :t AND NOT derived AND ("
            "(from_id = :f AND predicate = :p AND to_id = :to) OR "
            "(from_id = :to AND predicate = :twin AND to_id = :f)) RETURNING id"
        ),
        {"t": tenant_id, "f": from_id, "p": predicate, "to": to_id, "twin": twin or ""},
    )
    return len(result.all())


async def delete_node_edges(conn: AsyncConnection, tenant_id: UUID, node_id: UUID) -> list[str]:
    """Remove every edge touching a node; returns the predicates that were removed."""
    rows = await conn.execute(
        text(
            "DELETE FROM edges WHERE tenant_id = :t AND (from_id = :n OR to_id = :n) "
            "RETURNING predicate"
        ),
        {"t": tenant_id, "n": node_id},
    )
    return list(rows.scalars())


def _path_sql(path: Sequence[str], offset: int) -> tuple[str, dict[str, str]]:
    """SELECT (x, x kind, z, z kind) for chains of forward edges with the given predicates."""
    params = {f"p{offset}_{i}": predicate for i, predicate in enumerate(path)}
    joins = "".join(
        f" JOIN edges e{i} ON e{i}.tenant_id = e0.tenant_id AND e{i}.from_id = e{i - 1}.to_id "
        f"AND e{i}.predicate = :p{offset}_{i} AND e{i}.valid_to IS NULL"
        for i in range(1, len(path))
    )
    last = len(path) - 1
    sql = (
        f"SELECT e0.from_id AS x, e0.from_kind AS xk, e{last}.to_id AS z, e{last}.to_kind AS zk "
        f"FROM edges e0{joins} WHERE e0.tenant_id = :t AND e0.predicate = :p{offset}_0 "
        f"AND e0.valid_to IS NULL AND e0.from_id <> e{last}.to_id"
    )
    return sql, params


async def recompute_derived(
    conn: AsyncConnection, tenant_id: UUID, predicate: str, paths: Sequence[Sequence[str]]
) -> None:
    """Make the derived edges of ``predicate`` exactly the pairs its paths connect."""
    parts, params = [], {"t": tenant_id, "d": predicate}
    for i, path in enumerate(paths):
        sql, path_params = _path_sql(path, i)
        parts.append(sql)
        params.update(path_params)
    desired = " UNION ".join(parts)
    await conn.execute(
        text(
            f"WITH desired AS ({desired}) INSERT INTO edges (tenant_id, from_id, from_kind, "
            "to_id, to_kind, predicate, derived) SELECT DISTINCT :t, x, xk, z, zk, :d, true "
            "FROM desired ON CONFLICT (tenant_id, from_id, predicate, to_id) "
            "WHERE valid_to IS NULL DO NOTHING"
        ),
        params,
    )
    await conn.execute(
        text(
            f"WITH desired AS ({desired}) DELETE FROM edges e WHERE e.tenant_id = :t "
            "AND e.predicate = :d AND e.derived AND NOT EXISTS "
            "(SELECT 1 FROM desired WHERE x = e.from_id AND z = e.to_id)"
        ),
        params,
    )


async def insert_mentions(
    conn: AsyncConnection, tenant_id: UUID, mentions: Sequence[tuple[Any, ...]]
) -> int:
    """Rows of (memory, chunk | None, entity, method, confidence, start, end); duplicates of
    (memory, entity, method) are ignored. Inserted in entity id order: each row's foreign key
    holds its entity, and an erasure locks the entities it may remove in the same order."""
    if not mentions:
        return 0
    mentions = sorted(mentions, key=lambda row: (str(row[2]), str(row[0])))
    result = await conn.execute(
        text(
            "INSERT INTO mentions (tenant_id, memory_id, chunk_id, entity_id, method, confidence, "
            "start_offset, end_offset) VALUES (:t, :m, :c, :e, :method, :conf, :s, :end) "
            "ON CONFLICT (tenant_id, memory_id, entity_id, method) DO NOTHING"
        ),
        [
            {
                "t": tenant_id,
                "m": m,
                "c": c,
                "e": e,
                "method": method,
                "conf": conf,
                "s": s,
                "end": end,
            }
            for m, c, e, method, conf, s, end in mentions
        ],
    )
    return result.rowcount or 0


async def node_relations(
    conn: AsyncConnection, tenant_id: UUID, node_id: UUID, *, closed: bool = False
) -> list[dict[str, Any]]:
    """Edges out of and into a node, and mentions (as MENTIONS memory → entity). Current edges
    only; with ``closed`` also those that no longer hold (``valid_to`` set)."""
    current = "" if closed else " AND valid_to IS NULL"
    return await dict_rows(
        conn,
        text(
            "WITH rel AS ("
            " SELECT predicate, 'out' AS direction, confidence, derived, to_id AS node_id, "
            " to_kind AS kind, id AS edge_id, valid_from, valid_to FROM edges "
            f" WHERE tenant_id = :t AND from_id = :n{current}"
            " UNION ALL SELECT predicate, 'in', confidence, derived, from_id, from_kind, id, "
            f" valid_from, valid_to FROM edges WHERE tenant_id = :t AND to_id = :n{current}"
            " UNION ALL SELECT 'MENTIONS', 'out', max(confidence), false, entity_id, 'entity', "
            " NULL, NULL, NULL FROM mentions WHERE tenant_id = :t AND memory_id = :n "
            " GROUP BY entity_id"
            " UNION ALL SELECT 'MENTIONS', 'in', max(confidence), false, memory_id, 'memory', "
            " NULL, NULL, NULL FROM mentions WHERE tenant_id = :t AND entity_id = :n "
            " GROUP BY memory_id)"
            " SELECT rel.*, coalesce(e.name, m.title, left(m.content, 80)) AS title_or_name, "
            " e.entity_class FROM rel"
            " LEFT JOIN entities e ON e.tenant_id = :t AND e.id = rel.node_id"
            " LEFT JOIN memories m ON m.tenant_id = :t AND m.id = rel.node_id"
            # a memory the session does not see (another end user's) is no node of its graph
            " WHERE rel.kind <> 'memory' OR m.id IS NOT NULL"
            " ORDER BY rel.direction DESC, rel.predicate, title_or_name, rel.valid_from"
        ),
        {"t": tenant_id, "n": node_id},
    )


# (a, a kind, b, b kind, weight) with the nodes' ids as text
TextLink = tuple[str, str, str, str, float]


def uuid_from_text(text: str) -> UUID:
    """A node id read as text back to a UUID (the driver's UUID type: a ``uuid.UUID``, equal
    and hashed alike, built several times faster)."""
    value: UUID = PgUUID(text)
    return value


# A link's memory ends, and the memory that drew it, are ones the session sees.
_SEEN = "EXISTS (SELECT 1 FROM memories v WHERE v.tenant_id = :t AND v.id = {id})"
_EDGE_SEEN = (
    f" AND (from_kind <> 'memory' OR {_SEEN.format(id='from_id')})"
    f" AND (to_kind <> 'memory' OR {_SEEN.format(id='to_id')})"
    " AND (NOT properties ? 'source_memory_id' OR "
    + _SEEN.format(id="CAST(properties->>'source_memory_id' AS uuid)")
    + ")"
)
_MENTION_SEEN = " AND " + _SEEN.format(id="memory_id")


def _neighbour_sql(edge_seen: str, mention_seen: str) -> str:
    """The frontier's links, ``per_node`` per node, direction and kind, ``max_links`` in all."""
    return (
        "WITH frontier AS (SELECT DISTINCT unnest(CAST(:f AS uuid[])) AS id) "
        "SELECT array_agg(CAST(a AS text)), array_agg(a_kind), "
        "array_agg(CAST(b AS text)), array_agg(b_kind), "
        "array_agg(w) FROM (SELECT * FROM ("
        " SELECT e.* FROM frontier, LATERAL (SELECT from_id, from_kind, to_id, to_kind, "
        " confidence FROM edges WHERE tenant_id = :t AND valid_to IS NULL "
        f" AND from_id = frontier.id{edge_seen} LIMIT :per_node) e"
        " UNION ALL SELECT e.* FROM frontier, LATERAL (SELECT from_id, from_kind, to_id, "
        " to_kind, confidence FROM edges WHERE tenant_id = :t AND valid_to IS NULL "
        f" AND to_id = frontier.id{edge_seen} LIMIT :per_node) e"
        " UNION ALL SELECT m.memory_id, 'memory', m.entity_id, 'entity', m.confidence "
        " FROM frontier, LATERAL (SELECT memory_id, entity_id, confidence FROM mentions "
        f" WHERE tenant_id = :t AND entity_id = frontier.id{mention_seen} LIMIT :per_node) m"
        " WHERE frontier.id <> ALL(CAST(:memories AS uuid[]))"
        " UNION ALL SELECT m.memory_id, 'memory', m.entity_id, 'entity', m.confidence "
        " FROM frontier, LATERAL (SELECT memory_id, entity_id, confidence FROM mentions "
        f" WHERE tenant_id = :t AND memory_id = frontier.id{mention_seen} LIMIT :per_node) m"
        " WHERE frontier.id <> ALL(CAST(:entities AS uuid[]))"
        ") AS u LIMIT :max_links) AS links(a, a_kind, b, b_kind, w)"
    )


async def neighbour_links(
    conn: Conn,
    tenant_id: UUID,
    frontier: Sequence[UUID | str],
    *,
    per_node: int = 40,
    max_links: int = 2000,
    memories: Collection[str] | None = None,
) -> list[TextLink]:
    """Current edges and mentions touching the frontier: (a, a kind, b, b kind, weight),
    node ids as text.

    Bounded work: at most ``per_node`` links per frontier node and direction (an index range
    each, so a hub entity mentioned by thousands of memories costs ``per_node`` rows, not
    thousands) and at most ``max_links`` in all. A (memory, entity) pair found by several
    methods comes once per method; the subgraph keeps the highest weight.

    ``memories`` (ids as text), when the frontier's kinds are known: its memories; the other
    frontier nodes are entities. The mention look-ups a kind rules out are skipped (a memory is
    never the entity of a mention, nor an entity its memory): the rows and their order are
    those of the full look-up."""
    ids = [str(n) for n in frontier]
    known_memories: list[str] = []
    entities: list[str] = []
    if memories is not None:
        for node in ids:
            (known_memories if node in memories else entities).append(node)
    # a session held to one end user walks the memories it sees only (row-level security
    # decides which): no other user's memory is a node, nor a bridge, of its graph
    edge_seen = mention_seen = ""
    if user_of(tenant_id) is not None:
        edge_seen, mention_seen = _EDGE_SEEN, _MENTION_SEEN
    row = await fetchrow(
        conn,
        _neighbour_sql(edge_seen, mention_seen),
        {
            "t": tenant_id,
            "f": ids,
            "memories": known_memories,
            "entities": entities,
            "per_node": per_node,
            "max_links": max_links,
        },
        # a node's links are its first ``per_node`` in the chosen index's order: a generic plan
        # adopted after five executions could keep other ones
        replan=True,
    )
    # one row of arrays: thousands of links decode in the driver, not row by row in Python
    a, a_kind, b, b_kind, weight = row
    return list(zip(a or (), a_kind or (), b or (), b_kind or (), weight or (), strict=True))


async def mentioned_entities(
    conn: Conn, tenant_id: UUID, memory_ids: Sequence[UUID]
) -> list[tuple[UUID, UUID]]:
    """(memory id, entity id) for every entity the memories mention."""
    rows = await fetch(
        conn,
        (
            "SELECT DISTINCT memory_id, entity_id FROM mentions "
            "WHERE tenant_id = :t AND memory_id = ANY(:m)"
        ),
        {"t": tenant_id, "m": list(memory_ids)},
    )
    return [(r[0], r[1]) for r in rows]
