"""Drains the graph outbox into Neo4j in commit order, in small batches, with backoff.

PostgreSQL stays the system of record: a mirror outage only grows the outbox (reported as lag);
writes never wait for the mirror.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from uuid import UUID

import structlog

from knowmind.db.engine import Database
from knowmind.graph.changes import GraphChange

if TYPE_CHECKING:
    from knowmind.graph.neo4j_mirror import Neo4jMirror
from knowmind.store import outbox as outbox_store

__all__ = ["MirrorDrainer", "MirrorStatus", "resync_tenant"]

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class MirrorStatus:
    connected: bool = False
    last_error: str | None = None
    last_success_at: float | None = None
    applied: int = 0


class MirrorDrainer:
    def __init__(
        self,
        db: Database,
        connect: Callable[[], Awaitable[Neo4jMirror]],
        *,
        batch_size: int = 30,
        idle_seconds: float = 0.5,
        max_backoff_seconds: float = 30.0,
    ) -> None:
        self.db = db
        self._connect = connect
        self.batch_size = batch_size
        self.idle_seconds = idle_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.status = MirrorStatus()
        self._mirror: Neo4jMirror | None = None

    async def mirror(self) -> Neo4jMirror:
        if self._mirror is None:
            mirror = await self._connect()
            await mirror.ensure_schema()
            self._mirror = mirror
            self.status.connected = True
        return self._mirror

    async def drain_once(self) -> int:
        """Apply one batch; 0 when the outbox is empty or another process holds the drain."""
        mirror = await self.mirror()
        async with self.db.owner_tx() as conn:
            if not await outbox_store.try_drain_lock(conn):
                return 0
            rows = await outbox_store.take_outbox_batch(conn, self.batch_size)
            if not rows:
                return 0
            await mirror.apply([GraphChange(t, op, payload) for t, _, op, payload in rows])
            await outbox_store.delete_outbox_rows(conn, [row_id for _, row_id, _, _ in rows])
        self.status.applied += len(rows)
        self.status.last_success_at = time.time()
        self.status.last_error = None
        return len(rows)

    async def run_forever(self) -> None:
        failures = 0
        while True:
            try:
                applied = await self.drain_once()
                failures = 0
            except Exception as exc:
                failures += 1
                self.status.last_error = f"{type(exc).__name__}: {exc}"[:300]
                await self._drop_connection()
                delay = min(self.max_backoff_seconds, 0.5 * 2**failures)
                log.warning("mirror.drain_failed", error_type=type(exc).__name__, retry_in_s=delay)
                await asyncio.sleep(delay)
                continue
            if applied < self.batch_size:
                await asyncio.sleep(self.idle_seconds)

    async def close(self) -> None:
        await self._drop_connection()

    async def _drop_connection(self) -> None:
        mirror, self._mirror = self._mirror, None
        self.status.connected = False
        if mirror is not None:
            try:
                await mirror.close()
            except Exception:
                log.debug("mirror.close_failed")


async def resync_tenant(db: Database, mirror: Neo4jMirror, tenant_id: UUID) -> dict[str, int]:
    """Rebuild one tenant's mirror from PostgreSQL: delete it there, then push every node and
    edge again (the outbox rows still pending are harmless: MERGE and deletes are idempotent)."""
    await mirror.delete_tenant(tenant_id)
    async with db.owner_tx() as conn:
        changes = [
            GraphChange(tenant_id, op, payload)
            for op, payload in await outbox_store.resync_changes(conn, tenant_id)
        ]
    for start in range(0, len(changes), 500):
        await mirror.apply(changes[start : start + 500])
    nodes = sum(1 for c in changes if c.op == "upsert_node")
    return {"nodes": nodes, "edges": len(changes) - nodes}
