"""Tenants and tokens (the admin plane, on the owner connection)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from knowmind.db.engine import Database
from knowmind.errors import ConflictError, InvalidInputError, NotFoundError
from knowmind.ingest.sentences import SENTENCE_JOB
from knowmind.services.audit import record
from knowmind.services.auth import SCOPES, Principal, hash_token, new_token
from knowmind.store import tenants as tenant_store
from knowmind.store import tokens as token_store
from knowmind.store.rows import TenantRow, TokenRow
from knowmind.store.sentences import count_chunks_without_sentences, queue_sentence_job
from knowmind.store.stats import analyze_recall_tables

__all__ = ["AdminService", "Backfill", "IssuedToken", "TenantRow", "find_tenant"]


@dataclass(frozen=True, slots=True)
class IssuedToken:
    row: TokenRow
    token: str


@dataclass(frozen=True, slots=True)
class Backfill:
    """A tenant's sentence-vector backfill: the chunks still without vectors, and whether a job
    was queued for them (False: none missing, or a job waits already)."""

    tenant_id: UUID
    missing: int
    queued: bool


class AdminService:
    def __init__(self, db: Database, embedding_model: str, embedding_dim: int) -> None:
        self.db = db
        self.embedding_model = embedding_model
        self.embedding_dim = embedding_dim

    async def create_tenant(
        self, name: str, language: str, who: Principal | None = None
    ) -> TenantRow:
        if not name.strip():
            raise InvalidInputError("name", "must not be blank")
        async with self.db.owner_tx() as conn:
            if not await tenant_store.language_exists(conn, language):
                raise InvalidInputError(
                    "language", f"{language!r} is not a text search configuration (pg_ts_config)"
                )
            try:
                row = await tenant_store.create_tenant(
                    conn, name.strip(), language, self.embedding_model, self.embedding_dim
                )
            except tenant_store.DuplicateTenantError as exc:
                existing = await tenant_store.get_tenant_by_name(conn, name.strip())
                raise ConflictError(
                    f"a tenant named {name.strip()!r} exists already",
                    "name",
                    existing_id=existing.id if existing else None,
                ) from exc
            await record(conn, who, "tenant.create", row.id, [row.id], {"language": language})
            return row

    async def refresh_statistics(self) -> None:
        """Planner statistics for the recall tables, after a bulk import."""
        async with self.db.owner_tx() as conn:
            await analyze_recall_tables(conn)

    async def backfill_sentences(self, tenant_id: UUID) -> Backfill:
        """Queue the tenant's ``embed_sentences`` job when some of its chunks have no sentence
        vectors (written while ``KNOWMIND_SENTENCE_VECTORS`` was off, or deferred): the job
        worker makes them in steps, the tenant's other jobs taking their turns between."""
        async with self.db.owner_tx() as conn:
            missing = await count_chunks_without_sentences(conn, tenant_id)
            queued = missing > 0 and await queue_sentence_job(conn, tenant_id, SENTENCE_JOB)
        return Backfill(tenant_id, missing, queued)

    async def get_tenant(self, tenant_id: UUID) -> TenantRow:
        async with self.db.owner_tx() as conn:
            row = await tenant_store.get_tenant(conn, tenant_id)
        if row is None:
            raise NotFoundError(f"tenant {tenant_id} not found")
        return row

    async def find_tenant(self, ref: str) -> TenantRow:
        return await find_tenant(self.db, ref)

    async def list_tenants(self) -> list[TenantRow]:
        async with self.db.owner_tx() as conn:
            return await tenant_store.list_tenants(conn)

    async def create_token(
        self,
        tenant_id: UUID,
        scopes: list[str],
        who: Principal | None = None,
        user_id: str | None = None,
    ) -> IssuedToken:
        """``user_id``: bind the token to one end user of the tenant (its writes are that
        user's, it reads that user's memories and the tenant's shared ones)."""
        unknown = sorted(set(scopes) - set(SCOPES))
        if unknown or not scopes:
            raise InvalidInputError("scopes", f"must be a non-empty subset of {list(SCOPES)}")
        token = new_token(tenant_id)
        async with self.db.owner_tx() as conn:
            if await tenant_store.get_tenant(conn, tenant_id) is None:
                raise NotFoundError(f"tenant {tenant_id} not found")
            row = await token_store.insert_token(
                conn, tenant_id, hash_token(token), sorted(set(scopes), key=SCOPES.index), user_id
            )
            detail: dict[str, object] = {"scopes": row.scopes, "user_bound": user_id is not None}
            await record(conn, who, "token.create", tenant_id, [row.id], detail)
        return IssuedToken(row=row, token=token)

    async def revoke_token(self, token_id: UUID, who: Principal | None = None) -> None:
        async with self.db.owner_tx() as conn:
            tenant = await token_store.revoke_token(conn, token_id)
            if tenant is None:
                raise NotFoundError(f"token {token_id} not found or already revoked")
            await record(conn, who, "token.revoke", tenant, [token_id])


async def find_tenant(db: Database, ref: str) -> TenantRow:
    """A tenant by id or by name (the CLI takes either wherever it takes a tenant)."""
    if not ref.strip():
        raise InvalidInputError("tenant", "must be a tenant id or name")
    async with db.owner_tx() as conn:
        try:
            row = await tenant_store.get_tenant(conn, UUID(ref))
        except ValueError:
            row = await tenant_store.get_tenant_by_name(conn, ref)
    if row is None:
        raise NotFoundError(f"tenant {ref!r} not found")
    return row
