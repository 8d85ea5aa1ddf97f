"""The graph outbox, drained in order by one mirror worker at a time (owner connection)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["delete_outbox_rows", "outbox_lag", "take_outbox_batch", "try_drain_lock"]

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
