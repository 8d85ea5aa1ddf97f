"""Typed rows returned by the store."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec

from knowmind.contract.records import MemoryFields, TenantFields

__all__ = ["ChunkHit", "MemoryRow", "TenantRow", "TokenRow"]


class TenantRow(TenantFields, frozen=True):
    """A tenant as the store reads it."""


class TokenRow(msgspec.Struct, frozen=True):
    id: UUID
    tenant_id: UUID
    scopes: list[str]
    created_at: datetime
    user_id: str | None = None  # the end user it is bound to (None: the whole tenant)


class MemoryRow(MemoryFields, frozen=True, kw_only=True):
    """A memory as the store reads it back (it is written as a ``store.memories.Draft``)."""

    id: UUID
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    document_id: UUID | None
    recorded_at: datetime | None = None
    superseded_at: datetime | None = None
    chunk_count: int = 0


class ChunkHit(msgspec.Struct, frozen=True):
    """A chunk joined with the memory it belongs to, as shown in recall results."""

    chunk_id: UUID
    memory_id: UUID
    content: str
    title: str | None
    source: str | None
    memory_type: str
    created_at: datetime
    kind: str | None = None  # a tagged statement's kind (contract.limits.STATEMENT_KINDS)
    occurred_at: datetime | None = None  # the memory's event time
    speaker: str | None = None
    speaker_role: str | None = None
