"""Remember, read, list and delete memories."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from uuid import UUID

import msgspec
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.contract.drafts import RelationIn
from knowmind.contract.limits import require_visible
from knowmind.errors import ConflictError, InvalidInputError, NotFoundError
from knowmind.graph.postgres import remove_node_edges
from knowmind.ingest.pipeline import prepare_chunks
from knowmind.services.auth import Principal, refuse_unless_owner, tenant_of
from knowmind.services.lookup import memory_or_404
from knowmind.services.recipe import MemoryWriter
from knowmind.store import memories as memory_store
from knowmind.store.rows import MemoryRow
from knowmind.store.search import MemoryFilters, utc_instant

__all__ = [
    "MEMORY_TYPES",
    "MemoryDraft",
    "MemoryFilters",
    "MemoryRow",
    "MemoryService",
    "Remembered",
    "check_draft",
    "memory_key",
    "scoped_draft",
]

MEMORY_TYPES = ("semantic", "episodic", "procedural", "reference")


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryDraft(memory_store.Draft):
    """A memory to write (the store's ``Draft``, which the store inserts as it is) and the
    relations given with it."""

    relations: tuple[RelationIn, ...] = ()


@dataclass(frozen=True, slots=True)
class Remembered:
    id: UUID
    status: str  # "created" | "unchanged"
    chunks: int
    job_id: UUID | None = None


def content_sha256(content: str) -> bytes:
    return hashlib.sha256(content.encode()).digest()


#: Where in the tenant a memory belongs (None: shared).
_SCOPES = ("user_id", "agent_id", "session_id")
#: The draft's fields that make a memory another one than the same content without them.
_IDENTITY = (*_SCOPES, "speaker", "role", "occurred_at")


def memory_key(draft: MemoryDraft) -> bytes:
    """What identifies a standalone memory for idempotent writes (``memories.content_sha256``,
    unique among a tenant's current standalone memories): the content's SHA-256 alone, or,
    for a memory with a scope, speaker, role or event time, the SHA-256 of the content and
    those (the same words said by another user, in another session or at another time are
    another memory). Content holds no NUL, so the two parts cannot run into each other."""
    identity = [getattr(draft, name) for name in _IDENTITY]
    if all(value is None for value in identity):
        return content_sha256(draft.content)
    return hashlib.sha256(draft.content.encode() + b"\x00" + msgspec.json.encode(identity)).digest()


def scoped_draft(who: Principal, draft: MemoryDraft) -> MemoryDraft:
    """The draft as it is written: validated (``check_draft``), its event time in UTC, and
    through a user-bound token with that token's user whatever the draft says."""
    check_draft(draft)
    occurred_at = (
        None if draft.occurred_at is None else utc_instant(draft.occurred_at, "occurred_at")
    )
    user_id = who.user_id if who.user_id is not None else draft.user_id
    return replace(draft, occurred_at=occurred_at, user_id=user_id)


class MemoryService(MemoryWriter):
    async def remember(self, who: Principal, draft: MemoryDraft) -> Remembered:
        tenant = tenant_of(who)
        draft = scoped_draft(who, draft)
        sha = memory_key(draft)
        existing = await self._existing(tenant, sha, draft.relations, check_quota=True)
        if existing:
            return existing
        prepared = await prepare_chunks(
            self.embedder,
            draft.title,
            draft.content,
            self.ingest.chunk_target_chars,
            self.ingest.chunk_overlap_chars,
            owner=str(tenant),
        )
        async with self.db.tenant_tx(tenant, write=True) as conn:
            stored = await self.write(
                conn,
                who,
                draft,
                sha,
                prepared.contents,
                prepared.embeddings,
                relations=draft.relations,
            )
            if stored is not None:  # its extraction job: within the tenant's quota, or undone
                await self.quota.check(conn, tenant, written=True)
        if stored is not None:
            self.on_job_enqueued()
            return Remembered(stored.id, "created", stored.chunks, stored.job_id)
        # A concurrent request stored the same content first.
        raced = await self._existing(tenant, sha)
        assert raced is not None
        return raced

    async def _existing(
        self,
        tenant: UUID,
        sha: bytes,
        relations: Sequence[RelationIn] = (),
        *,
        check_quota: bool = False,
    ) -> Remembered | None:
        """The current memory with this content, if any, once ``relations`` are checked: they
        are checked on every write (unchanged content too) before anything is embedded; and
        with ``check_quota``, new content is refused before it is embedded when the tenant's
        queued background work is at its quota."""
        async with self.db.tenant_tx(tenant) as conn:
            await self.graph.check_inline_relations(conn, tenant, relations)
            memory_id = await memory_store.find_by_sha(conn, tenant, sha)
            if memory_id is None:
                if check_quota:
                    await self.quota.check(conn, tenant)
                return None
            row = await memory_store.get_memory(conn, tenant, memory_id)
        return Remembered(memory_id, "unchanged", row.chunk_count if row else 0)

    async def supersede(
        self,
        who: Principal,
        target_id: UUID,
        new_title: str | None,
        new_content: str,
        reason: str | None = None,
    ) -> Remembered:
        """Bi-temporal update: the old memory's valid and transaction time end now, a new
        memory valid from now replaces it, linked new -SUPERSEDES-> old with the reason.
        Nothing is deleted: ``as_of`` / ``known_at`` recalls still find the old fact."""
        tenant = tenant_of(who)
        require_visible(new_content, "new_content")
        prepared = await prepare_chunks(
            self.embedder,
            new_title,
            new_content,
            self.ingest.chunk_target_chars,
            self.ingest.chunk_overlap_chars,
            owner=str(tenant),
        )
        async with self.db.tenant_tx(tenant, write=True) as conn:
            old = await _close_for_superseding(conn, who, tenant, target_id)
            successor = _successor(old, new_title, new_content)
            stored = await self.write(
                conn,
                who,
                successor,
                memory_key(successor),
                prepared.contents,
                prepared.embeddings,
                document_id=old.document_id,
            )
            if stored is None:
                raise ConflictError("a current memory with exactly this content exists")
            await self.graph.link_supersedes(conn, tenant, stored.id, target_id, reason)
            await self.quota.check(conn, tenant, written=True)
        self.on_job_enqueued()
        return Remembered(stored.id, "created", stored.chunks, stored.job_id)

    async def get(self, who: Principal, memory_id: UUID) -> MemoryRow:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            return await memory_or_404(conn, tenant, memory_id)

    async def list_recent(
        self,
        who: Principal,
        limit: int,
        cursor: str | None,
        filters: MemoryFilters | None = None,
    ) -> tuple[list[MemoryRow], str | None]:
        """Newest first; ``filters``: their scopes and event time only."""
        tenant = tenant_of(who)
        after = decode_cursor(cursor) if cursor else None
        async with self.db.tenant_tx(tenant) as conn:
            rows = await memory_store.list_memories(conn, tenant, limit + 1, after, filters)
        next_cursor = encode_cursor(rows[limit - 1]) if len(rows) > limit else None
        return rows[:limit], next_cursor

    async def delete(self, who: Principal, memory_id: UUID) -> int:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant, write=True) as conn:
            await memory_store.lock_memories(conn, tenant, [memory_id])
            if who.user_id is not None:  # a shared memory: refused before its edges go
                found = await memory_or_404(conn, tenant, memory_id)
                refuse_unless_owner(who, found.user_id, "a memory")
            ontology = await self.graph.ontology(conn, tenant)
            await remove_node_edges(conn, tenant, ontology, memory_id)
            removed = await memory_store.delete_memory(conn, tenant, memory_id)
        if removed is None:
            raise NotFoundError(f"memory {memory_id} not found")
        return removed


def check_draft(draft: MemoryDraft) -> None:
    require_visible(draft.content, "content")
    if draft.memory_type not in MEMORY_TYPES:
        raise InvalidInputError("memory_type", f"must be one of {list(MEMORY_TYPES)}")
    if draft.occurred_at is not None:
        utc_instant(draft.occurred_at, "occurred_at")


def encode_cursor(row: MemoryRow) -> str:
    raw = f"{row.created_at.isoformat()}|{row.id}"
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, UUID]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, memory_id = base64.urlsafe_b64decode(padded).decode().split("|")
        return datetime.fromisoformat(created), UUID(memory_id)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInputError("cursor", "is not a cursor returned by this API") from exc


async def _close_for_superseding(
    conn: AsyncConnection, who: Principal, tenant: UUID, target_id: UUID
) -> MemoryRow:
    """End the target's validity now; 404 when it is not there (or not the caller's), 409
    when it was superseded already."""
    old = await memory_store.close_validity(conn, tenant, target_id)
    if old is not None:
        return old
    found = await memory_or_404(conn, tenant, target_id)
    refuse_unless_owner(who, found.user_id, "a memory")
    raise ConflictError(f"memory {target_id} was already superseded")


#: What a new version takes over from the one it supersedes as it is (and its tags, as a tuple).
_SUCCESSOR_KEEPS = ("memory_type", "source", "domain", "metadata", *_SCOPES)


def _successor(old: MemoryRow, title: str | None, content: str) -> MemoryDraft:
    """The new version: the old one's type, tags, source and scopes (not its speaker nor its
    event time: it is said now)."""
    kept = {name: getattr(old, name) for name in _SUCCESSOR_KEEPS}
    return MemoryDraft(title=title, content=content, tags=tuple(old.tags), **kept)
