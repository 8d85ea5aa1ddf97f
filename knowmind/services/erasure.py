"""Provable erasure (GDPR): every trace of a memory, a document or a tenant, with a receipt.

Supersede keeps history; erasure is the explicit exception. The receipt counts what was removed
per store; with a graph mirror configured, the deletions are queued in the outbox in the same
transaction and the mirror worker removes the nodes and relationships from Neo4j.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.db.engine import Database
from knowmind.db.tenant_scope import UserScope
from knowmind.errors import ForbiddenError, InvalidInputError, NotFoundError
from knowmind.graph.postgres import refresh_derived
from knowmind.services.audit import record
from knowmind.services.auth import Principal, refuse_unless_owner, tenant_of
from knowmind.services.graph import GraphService
from knowmind.services.lookup import memory_or_404
from knowmind.store import erasure as erasure_store
from knowmind.store import memories as memory_store
from knowmind.store.documents import delete_document, find_document
from knowmind.store.outbox import count_outbox_rows, discard_tenant_outbox
from knowmind.store.tenant_index import drop_tenant_index
from knowmind.store.tenants import tenant_exists

__all__ = ["ErasureService", "JobsCancelled", "Receipt"]

#: {"erased": {store: rows}, "graph_mirror": {...}, "audit_id": id of the audit entry}
Receipt = dict[str, Any]
#: (tenant, the ids of its jobs erased, or None: all of them) → None
JobsCancelled = Callable[[UUID, Collection[UUID] | None], object]


class ErasureService:
    def __init__(
        self,
        db: Database,
        graph: GraphService,
        mirror_enabled: bool,
        on_jobs_cancelled: JobsCancelled = lambda tenant, jobs: None,
    ) -> None:
        """``on_jobs_cancelled(tenant, job ids or None for all)``: called once the erasure of
        jobs committed, so that the job worker stops those it is running (at once; a worker
        in another process notices within its watch interval)."""
        self.db = db
        self.graph = graph
        self.mirror_enabled = mirror_enabled
        self.on_jobs_cancelled = on_jobs_cancelled

    async def erase_memory(self, who: Principal, memory_id: UUID) -> Receipt:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant, write=True) as conn:
            found = await memory_or_404(conn, tenant, memory_id)
            refuse_unless_owner(who, found.user_id, "a memory")
            receipt, jobs = await self._erase(conn, tenant, [memory_id], [])
            receipt = await _audited(conn, who, "memory.erase", tenant, [memory_id], receipt)
        self._cancel(tenant, jobs)
        return receipt

    async def erase_document(self, who: Principal, document_id: UUID) -> Receipt:
        """The document, its memories and every job of it (its extraction, its summary tree,
        a queued upload that would replace it)."""
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant, write=True) as conn:
            if await find_document(conn, tenant, document_id=document_id, lock=True) is None:
                raise NotFoundError(f"document {document_id} not found")
            memory_ids = await memory_store.memory_ids_of_document(conn, tenant, document_id)
            await delete_document(conn, tenant, document_id)
            receipt, jobs = await self._erase(conn, tenant, memory_ids, [document_id])
            targets = [document_id, *memory_ids]
            receipt = await _audited(conn, who, "document.erase", tenant, targets, receipt)
        self._cancel(tenant, jobs)
        return receipt

    async def erase_user(
        self, who: Principal, user_id: str, tenant_id: UUID | None = None
    ) -> Receipt:
        """A GDPR request of one end user: every memory of ``user_id`` with its chunks,
        mentions, the edges it drew, its jobs and the entities only it named, and the answer
        threads of the tokens bound to that user. A tenant admin token erases any user of its
        tenant, a user-bound one only its own; the server admin names the tenant
        (``tenant_id``). The erasure runs held to that user by row-level security, so the
        database itself refuses to touch another user's or a shared memory. The receipt counts
        what went; the audit entry names the memories, and the user only by a hash."""
        if who.is_server_admin:
            if tenant_id is None:
                raise InvalidInputError("tenant_id", "the server admin names the tenant")
            tenant = tenant_id
        else:
            tenant = UUID(int=tenant_of(who).int)
            if who.user_id is not None and who.user_id != user_id:
                raise ForbiddenError("a user-bound token erases its own user only")
        async with self.db.owner_tx() as conn:
            if not await tenant_exists(conn, tenant):
                raise NotFoundError(f"tenant {tenant} not found")
            tokens = await erasure_store.user_token_ids(conn, tenant, user_id)
        scope = UserScope(tenant, user_id)
        async with self.db.tenant_tx(scope, write=True) as conn:
            memory_ids = await erasure_store.user_memory_ids(conn, tenant, user_id)
            receipt, jobs = await self._erase(conn, scope, memory_ids, [])
            receipt["erased"]["conversations"] = await erasure_store.erase_conversations(
                conn, tenant, tokens
            )
            detail = {**receipt, "user_sha256": hashlib.sha256(user_id.encode()).hexdigest()}
            audit_id = await record(conn, who, "user.erase", tenant, memory_ids, detail)
        self._cancel(tenant, jobs)
        return {**receipt, "user_id": user_id, "audit_id": audit_id}

    def _cancel(self, tenant: UUID, jobs: list[UUID] | None) -> None:
        if jobs is None or jobs:
            # the tenant's plain id: running jobs are matched by it
            self.on_jobs_cancelled(UUID(int=tenant.int), jobs)

    async def _erase(
        self,
        conn: AsyncConnection,
        tenant: UUID,
        memory_ids: list[UUID],
        document_ids: list[UUID],
    ) -> tuple[Receipt, list[UUID]]:
        """The receipt, and the ids of the jobs erased."""
        documents = len(document_ids)
        outbox_before = await count_outbox_rows(conn, tenant)
        counts, touched, predicates, jobs = await erasure_store.erase_memories(
            conn, tenant, memory_ids, document_ids
        )
        entities, entity_edges = await erasure_store.erase_orphan_entities(conn, tenant, touched)
        await refresh_derived(conn, tenant, await self.graph.ontology(conn, tenant), predicates)
        counts |= {"entities": entities, "documents": documents}
        counts["edges"] += entity_edges
        counts["vectors"] = counts["tsvectors"] = counts["chunks"]
        mirror = await self._mirror(conn, tenant, outbox_before)
        return {"erased": counts, "graph_mirror": mirror}, jobs

    async def _mirror(self, conn: AsyncConnection, tenant: UUID, before: int) -> dict[str, int]:
        if not self.mirror_enabled:
            return {}
        return {"deletions_queued": await count_outbox_rows(conn, tenant) - before}

    async def erase_tenant(self, tenant_id: UUID, who: Principal | None = None) -> Receipt:
        """Server admin: the tenant and everything it owns (tokens included, and its own HNSW
        index, dropped right after the rows). Its audit entries stay: ids and counts only.
        Its jobs go with it: those running stop (``on_jobs_cancelled``)."""
        async with self.db.owner_tx() as conn:
            if not await tenant_exists(conn, tenant_id):
                raise NotFoundError(f"tenant {tenant_id} not found")
            before = await erasure_store.tenant_row_counts(conn, tenant_id)
            await erasure_store.delete_tenant(conn, tenant_id)
            if not self.mirror_enabled:  # nothing will ever drain these
                await discard_tenant_outbox(conn, tenant_id)
            after = await erasure_store.tenant_row_counts(conn, tenant_id)
            erased = {t: before[t] - after[t] for t in before if t != "graph_outbox"}
            erased["tenants"] = 1
            audit_id = await record(conn, who, "tenant.erase", tenant_id, [tenant_id], erased)
        self._cancel(tenant_id, None)
        # its own HNSW index (now empty) goes too; DROP ... CONCURRENTLY needs autocommit
        async with self.db.owner_autocommit() as conn:
            erased["vector_indexes"] = int(await drop_tenant_index(conn, tenant_id))
        if not self.mirror_enabled:
            erased["graph_outbox"] = before["graph_outbox"]
            return {"erased": erased, "graph_mirror": {}, "audit_id": audit_id}
        queued = after["graph_outbox"] - before["graph_outbox"]
        mirror = {"deletions_queued": queued}
        return {"erased": erased, "graph_mirror": mirror, "audit_id": audit_id}


async def _audited(
    conn: AsyncConnection,
    who: Principal,
    action: str,
    tenant: UUID,
    targets: list[UUID],
    receipt: Receipt,
) -> Receipt:
    """The receipt with the id of the audit entry recording it (same transaction)."""
    return {**receipt, "audit_id": await record(conn, who, action, tenant, targets, receipt)}
