"""Large tenants' own HNSW indexes (``knowmind tenant-index``): build, drop, list, and build for
every tenant from a size on. Builds run ``CONCURRENTLY``: recalls and writes go on meanwhile,
and the vector stage switches to the index once it is valid."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

import structlog

from knowmind.db.engine import Database
from knowmind.services.admin import find_tenant
from knowmind.store import tenant_index as index_store
from knowmind.store.rows import TenantRow
from knowmind.store.tenant_index import TenantIndex

__all__ = ["BuildResult", "TenantIndexService"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class BuildResult:
    tenant_id: UUID
    chunks: int  # in the index
    built: bool  # False: a valid index existed already
    seconds: float  # wall-clock time the build took


class TenantIndexService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def tenant(self, ref: str) -> TenantRow:
        """A tenant by id or by name."""
        return await find_tenant(self.db, ref)

    async def build(self, tenant_id: UUID, chunks: int | None = None) -> BuildResult:
        started = time.perf_counter()
        log.info("tenant_index.build_started", tenant=str(tenant_id), chunks=chunks)
        async with self.db.owner_autocommit() as conn:
            built = await index_store.build_tenant_index(conn, tenant_id)
        seconds = round(time.perf_counter() - started, 2)
        log.info("tenant_index.build_done", tenant=str(tenant_id), built=built, seconds=seconds)
        return BuildResult(tenant_id, chunks or 0, built, seconds)

    async def drop(self, tenant_id: UUID) -> bool:
        async with self.db.owner_autocommit() as conn:
            dropped = await index_store.drop_tenant_index(conn, tenant_id)
        log.info("tenant_index.dropped", tenant=str(tenant_id), dropped=dropped)
        return dropped

    async def build_for_large(
        self, min_rows: int, on_start: Callable[[UUID, int], None] = lambda *_: None
    ) -> list[BuildResult]:
        """An index for every tenant holding at least ``min_rows`` chunks (0: none)."""
        if min_rows <= 0:
            return []
        async with self.db.owner_tx() as conn:
            large = await index_store.tenant_chunk_counts(conn, min_rows)
        results = []
        for tenant_id, chunks in large.items():
            on_start(tenant_id, chunks)
            results.append(await self.build(tenant_id, chunks))
        return results

    async def list(self) -> list[TenantIndex]:
        async with self.db.owner_tx() as conn:
            return await index_store.list_tenant_indexes(conn)
