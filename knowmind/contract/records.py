"""Field groups declared once per resource and inherited by its records: the record the REST
API answers with and the SDK decodes (``contract/responses.py``) and the store's row
(``store/``). The tenant archive's memory record inherits ``MemoryFields`` too; its format is
versioned and pinned by a test (``tests/fixtures/archive_format.json``), so a change of these
that would change an archive fails there first."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

__all__ = ["EntityFields", "MemoryFields", "MemoryText", "TenantFields"]


class MemoryText(msgspec.Struct, frozen=True, kw_only=True):
    """What a memory says: as written, stored and shown."""

    title: str | None
    content: str
    memory_type: str
    tags: list[str]
    source: str | None
    domain: str | None
    metadata: dict[str, Any]


class MemoryFields(MemoryText, frozen=True, kw_only=True):
    """What a memory says, when it happened or was said (None: when it was written), who said
    it in which role, and its scopes inside the tenant (None: shared)."""

    occurred_at: datetime | None = None
    speaker: str | None = None
    speaker_role: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None


class EntityFields(msgspec.Struct, frozen=True):
    """An entity of the graph: as stored and shown."""

    id: UUID
    name: str
    entity_class: str
    description: str | None
    aliases: list[str]
    origin: str  # how it came to be: "api", "gazetteer", "ner", "llm", …
    confidence: float
    created_at: datetime


class TenantFields(msgspec.Struct, frozen=True):
    """A tenant: as stored and shown."""

    id: UUID
    name: str
    language: str  # its full-text configuration (german, english, simple, …)
    embedding_model: str
    embedding_dim: int
    created_at: datetime
