"""The graph outbox, drained in order by one mirror worker at a time (owner connection), and
the full-tenant read a mirror resync replays instead of the outbox."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "count_outbox_rows",
    "delete_outbox_rows",
    "discard_tenant_outbox",
    "outbox_lag",
    "resync_changes",
    "take_outbox_batch",
    "try_drain_lock",
]

# One drainer at a time keeps the mirror's changes in commit order across processes.
_DRAIN_LOCK = 0x6B6D_6F75  # "kmou"


async def try_drain_lock(conn: AsyncConnection) -> bool:
    return bool(await conn.scalar(text("SELECT pg_try_advisory_xact_lock(:k)"), {"k": _DRAIN_LOCK}))


async def take_outbox_batch(
    conn: AsyncConnection, limit: int
) -> list[tuple[UUID, int, str, dict[str, Any]]]:
    rows = await conn.execute(
        text("SELECT tenant_id, id, op, payload FROM graph_outbox ORDER BY id LIMIT :l"),
        {"l": limit},
    )
    return [(r.tenant_id, r.id, r.op, r.payload) for r in rows]


async def delete_outbox_rows(conn: AsyncConnection, ids: list[int]) -> None:
    await conn.execute(text("DELETE FROM graph_outbox WHERE id = ANY(:ids)"), {"ids": ids})


async def outbox_lag(conn: AsyncConnection, tenant_id: UUID | None = None) -> tuple[int, float]:
    """(pending changes, age in seconds of the oldest one)."""
    where = "WHERE tenant_id = :t" if tenant_id else ""
    row = (
        await conn.execute(
            text(
                "SELECT count(*), "
                "coalesce(extract(epoch FROM clock_timestamp() - min(created_at)), 0) "
                f"FROM graph_outbox {where}"
            ),
            {"t": tenant_id},
        )
    ).one()
    return int(row[0]), float(row[1])


async def count_outbox_rows(conn: AsyncConnection, tenant_id: UUID) -> int:
    return int(
        await conn.scalar(
            text("SELECT count(*) FROM graph_outbox WHERE tenant_id = :t"), {"t": tenant_id}
        )
    )


async def discard_tenant_outbox(conn: AsyncConnection, tenant_id: UUID) -> None:
    """Drop a tenant's pending changes (without a mirror nothing would ever drain them)."""
    await conn.execute(text("DELETE FROM graph_outbox WHERE tenant_id = :t"), {"t": tenant_id})


async def resync_changes(
    conn: AsyncConnection, tenant_id: UUID
) -> list[tuple[str, dict[str, Any]]]:
    """(op, payload) for every node and edge of the tenant, nodes first: what the outbox
    triggers would have queued had the mirror seen every insert."""
    rows = await conn.execute(text(_RESYNC_SQL), {"t": tenant_id})
    return [(op, payload) for op, payload in rows.all()]


# The payloads must match those the trigger function ``knowmind_outbox()`` of migration
# 0002_graph writes into graph_outbox (one jsonb_build_object per table: entities and memories
# → 'upsert_node', edges and mentions → 'upsert_edge' with predicate 'MENTIONS'): the mirror
# applies both through the same code. Change one, change the other (in a new migration).
# Nodes first, then edges and mentions: the order a fresh mirror is built in.
_RESYNC_SQL = """
SELECT op, payload FROM (
  SELECT 1 AS step, 'upsert_node' AS op, jsonb_build_object('id', id, 'kind', 'entity',
    'name', left(name, 100), 'entity_class', entity_class) AS payload
    FROM entities WHERE tenant_id = :t
  UNION ALL
  SELECT 1, 'upsert_node', jsonb_build_object('id', id, 'kind', 'memory',
    'name', left(coalesce(title, content), 100), 'entity_class', NULL)
    FROM memories WHERE tenant_id = :t
  UNION ALL
  SELECT 2, 'upsert_edge', jsonb_build_object('id', id, 'from_id', from_id, 'to_id', to_id,
    'predicate', predicate, 'confidence', confidence, 'derived', derived)
    FROM edges WHERE tenant_id = :t
  UNION ALL
  SELECT 2, 'upsert_edge', jsonb_build_object('id', id, 'from_id', memory_id,
    'to_id', entity_id, 'predicate', 'MENTIONS', 'confidence', confidence, 'derived', false)
    FROM mentions WHERE tenant_id = :t
) AS changes ORDER BY step
"""
