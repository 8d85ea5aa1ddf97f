"""SQL of the tenant archive: read a tenant's rows kind by kind through a server-side cursor
(inside the export's snapshot) and insert an archive's rows (inside the import's transaction).

The export reads as the app role with the tenant set, so row-level security keeps every other
tenant's rows out; the import writes as the schema owner (the admin plane) with the tenant id
given explicitly on every row.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any
from uuid import UUID

import msgspec
from pgvector.sqlalchemy import Vector
from sqlalchemy import RowMapping, bindparam, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.elements import TextClause

from knowmind.store.archive_records import KINDS, KindSpec, Row
from knowmind.store.search import MemoryFilters

__all__ = [
    "insert_rows",
    "kind_row_counts",
    "read_rows",
]

# Parameter types the driver cannot infer from a text statement.
_BIND_TYPES: dict[str, Any] = {"embedding": Vector(), "metadata": JSONB, "properties": JSONB}


def _select(spec: KindSpec, where: str = "") -> TextClause:
    columns = ", ".join(f"{spec.read[c]} AS {c}" if c in spec.read else c for c in spec.columns)
    # tenant_id = the session's tenant: the policy says the same; the index needs it said
    return text(
        f"SELECT {columns} FROM {spec.table} "
        f"WHERE tenant_id = knowmind_current_tenant(){where} ORDER BY {spec.order_by}"
    )


# A filtered archive (the memories of one user, agent, session or event-time window) holds
# those memories and what hangs on them alone: their chunks and mentions, their documents and
# those documents' summaries, the edges that touch or were drawn by them and none else, the
# entities those mentions and edges name, and the tenant's catalogue; no conversations.
_KEPT = "SELECT m.id FROM memories m WHERE m.tenant_id = knowmind_current_tenant(){scope}"
_KEPT_EDGE = (
    "(from_kind <> 'memory' OR from_id IN ({kept})) AND (to_kind <> 'memory' OR to_id IN "
    "({kept})) AND (properties->>'source_memory_id' IS NULL OR properties->>'source_memory_id' "
    "IN (SELECT CAST(k.id AS text) FROM ({kept}) AS k)) AND (from_kind = 'memory' "
    "OR to_kind = 'memory' OR properties->>'source_memory_id' IS NOT NULL)"
)
_KEPT_ENTITIES = (
    "SELECT entity_id FROM mentions WHERE tenant_id = knowmind_current_tenant() "
    "AND memory_id IN ({kept}) UNION SELECT from_id FROM edges "
    "WHERE tenant_id = knowmind_current_tenant() AND from_kind = 'entity' AND {edge} "
    "UNION SELECT to_id FROM edges WHERE tenant_id = knowmind_current_tenant() "
    "AND to_kind = 'entity' AND {edge}"
)
_KEPT_DOCUMENTS = (
    "SELECT m.document_id FROM memories m WHERE m.tenant_id = knowmind_current_tenant()"
    "{scope} AND m.document_id IS NOT NULL"
)
_FILTERED = {
    "memory": "id IN ({kept})",
    "chunk": "memory_id IN ({kept})",
    "mention": "memory_id IN ({kept})",
    "document": "id IN ({documents})",
    "summary_node": "document_id IN ({documents})",
    "edge": "{edge}",
    "entity": "id IN ({entities})",
    "entity_name": "entity_id IN ({entities})",
    "conversation": "false",
    "conversation_turn": "false",
}


def _filtered(kind: str, scope: str) -> str:
    """The AND-clause keeping a filtered archive's rows of ``kind`` (``scope``: the memories'
    clauses on the alias ``m``, ``MemoryFilters.scope_sql``)."""
    clause = _FILTERED.get(kind)
    if clause is None:
        return ""
    kept = _KEPT.format(scope=scope)
    edge = _KEPT_EDGE.format(kept=kept)
    return " AND " + clause.format(
        kept=kept,
        edge=edge,
        entities=_KEPT_ENTITIES.format(kept=kept, edge=edge),
        documents=_KEPT_DOCUMENTS.format(scope=scope),
    )


def _record(spec: KindSpec, row: RowMapping) -> Row:
    values = dict(row)
    if "embedding" in values:  # the vector's text form, shortest decimals that round-trip
        values["embedding"] = msgspec.json.decode(values["embedding"])
    record: Row = spec.record(**values)
    return record


async def read_rows(
    conn: AsyncConnection,
    spec: KindSpec,
    batch: int,
    filters: MemoryFilters | None = None,
) -> AsyncIterator[list[Row]]:
    """The session tenant's rows of one kind, ``batch`` at a time (server-side cursor);
    with ``filters`` (their scopes and event time), those of a filtered archive."""
    scope, params = filters.scope_sql() if filters is not None else ("", {})
    where = _filtered(spec.kind, scope) if filters is not None else ""
    result = await conn.stream(_select(spec, where), params)
    async for part in result.mappings().partitions(batch):
        yield [_record(spec, row) for row in part]


def _insert(spec: KindSpec) -> TextClause:
    columns = ("tenant_id", *spec.columns)
    values = ", ".join(spec.write.get(c, f":{c}") for c in columns)
    statement = text(f"INSERT INTO {spec.table} ({', '.join(columns)}) VALUES ({values})")
    binds = [bindparam(c, type_=t) for c, t in _BIND_TYPES.items() if c in spec.columns]
    return statement.bindparams(*binds) if binds else statement


_INSERTS = {spec.kind: _insert(spec) for spec in KINDS}


async def insert_rows(
    conn: AsyncConnection, tenant_id: UUID, spec: KindSpec, rows: Sequence[Row]
) -> None:
    """Insert rows of one kind for ``tenant_id`` (the chunk triggers keep BM25 statistics and
    the outbox triggers queue the graph mirror's changes, as on every write)."""
    if rows:
        params = [{"tenant_id": tenant_id, **msgspec.structs.asdict(r)} for r in rows]
        await conn.execute(_INSERTS[spec.kind], params)


async def kind_row_counts(conn: AsyncConnection, tenant_id: UUID) -> dict[str, int]:
    """Rows of every archived kind the tenant holds."""
    parts = " UNION ALL ".join(
        f"SELECT '{spec.kind}', count(*) FROM {spec.table} WHERE tenant_id = :t" for spec in KINDS
    )
    rows = await conn.execute(text(parts), {"t": tenant_id})
    return {str(kind): int(n) for kind, n in rows}
