"""The tenant archive's record types (``knowmind.tenant-export``, format version 1).

An archive is JSON Lines: a ``header`` line, then one line per stored row, grouped by kind in
``KINDS`` order (which respects the foreign keys on import), then a ``trailer`` line with the
count of each kind. Each record's fields are the columns of its table, less ``tenant_id`` (the
importing server sets its own) and columns the database computes (``chunks.tsv``,
``bm25_lexemes.reversed``). Not in an archive: api_tokens (secrets), jobs, graph_outbox, the
BM25 statistics (chunk_terms, bm25_lexemes, bm25_corpus: rebuilt by triggers as the chunks are
inserted), the sentence vectors (chunk_sentences: the import queues the tenant's
``embed_sentences`` job, which makes them again) and the audit log (the server's record, not the
tenant's data).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from knowmind.contract.records import MemoryFields

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "KINDS",
    "ArchiveRecord",
    "Header",
    "KindSpec",
    "Row",
    "TenantPart",
    "Trailer",
]

FORMAT = "knowmind.tenant-export"
FORMAT_VERSION = 1

_TAGGED: dict[str, Any] = {"tag_field": "type", "kw_only": True}


class TenantPart(msgspec.Struct, kw_only=True):
    id: UUID
    name: str
    language: str
    settings: dict[str, Any]  # the tenant's own settings (``PATCH /v1/settings``)
    created_at: datetime


class Header(msgspec.Struct, tag="header", **_TAGGED):
    format: str
    format_version: int
    schema_revision: str
    embedding_model: str
    embedding_dim: int
    embedding_storage: str
    tenant: TenantPart
    exported_at: datetime


class Trailer(msgspec.Struct, tag="trailer", **_TAGGED):
    counts: dict[str, int]


class OntologyClass(msgspec.Struct, tag="ontology_class", **_TAGGED):
    name: str
    description: str | None


class OntologyPredicate(msgspec.Struct, tag="ontology_predicate", **_TAGGED):
    name: str
    subject_classes: list[str]
    object_classes: list[str]
    inverse: str | None
    is_symmetric: bool
    description: str | None
    single_valued: bool = False  # absent from archives written before migration 0019


class Document(msgspec.Struct, tag="document", **_TAGGED):
    id: UUID
    title: str
    norm_title: str
    source: str | None
    content_sha256: bytes
    version: int
    created_at: datetime
    updated_at: datetime


# The memory's fields are the shared group the store's row has too; the archive format stays
# what it is because tests/fixtures/archive_format.json pins every record's fields and
# tests/test_tenant_archive.py fails on a change of them.
class Memory(MemoryFields, tag="memory", frozen=True, **_TAGGED):
    id: UUID
    content_sha256: bytes
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    document_id: UUID | None
    recorded_at: datetime
    superseded_at: datetime | None
    content_language: str | None = None  # archives written before it have none
    # archives written before migration 0020 have no event time (it is then created_at), no
    # speaker or scopes; those written before migration 0023 have no states_time: the import
    # reads it from the content
    states_time: bool | None = None


class Chunk(msgspec.Struct, tag="chunk", **_TAGGED):
    id: UUID
    memory_id: UUID
    ordinal: int
    content: str
    context: str | None
    language: str
    kind: str | None  # the statement kind (preference, fact, update), None for plain chunks
    embedding: list[float]


class Entity(msgspec.Struct, tag="entity", **_TAGGED):
    id: UUID
    name: str
    norm_name: str
    entity_class: str
    description: str | None
    aliases: list[str]
    origin: str
    confidence: float
    created_at: datetime


class EntityName(msgspec.Struct, tag="entity_name", **_TAGGED):
    entity_id: UUID
    norm_name: str
    is_alias: bool


class Mention(msgspec.Struct, tag="mention", **_TAGGED):
    id: UUID
    memory_id: UUID
    chunk_id: UUID | None
    entity_id: UUID
    method: str
    confidence: float
    start_offset: int | None
    end_offset: int | None
    created_at: datetime


class Edge(msgspec.Struct, tag="edge", **_TAGGED):
    id: UUID
    from_id: UUID
    from_kind: str
    to_id: UUID
    to_kind: str
    predicate: str
    confidence: float
    properties: dict[str, Any]
    derived: bool
    inverse_id: UUID | None
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None


class SummaryNode(msgspec.Struct, tag="summary_node", **_TAGGED):
    id: UUID
    document_id: UUID
    level: int
    content: str
    children: int
    embedding: list[float]
    model: str
    created_at: datetime


class Conversation(msgspec.Struct, tag="conversation", **_TAGGED):
    id: str  # the client's name (a UUID before migration 0022: older archives read the same)
    owner_token: UUID | None  # a token of the source server: no token here has that id
    shared: bool
    created_at: datetime
    updated_at: datetime


class ConversationTurn(msgspec.Struct, tag="conversation_turn", **_TAGGED):
    conversation_id: str
    ordinal: int
    role: str
    content: str
    standalone: str | None
    created_at: datetime


Row = (
    OntologyClass
    | OntologyPredicate
    | Document
    | Memory
    | Chunk
    | Entity
    | EntityName
    | Mention
    | Edge
    | SummaryNode
    | Conversation
    | ConversationTurn
)
ArchiveRecord = Header | Trailer | Row


class KindSpec(msgspec.Struct, frozen=True):
    """Where a kind's rows live: the table, the order they are read in (stable archives), and
    the columns that need a conversion on the way out (``read``) or in (``write``)."""

    kind: str
    record: type[Any]
    table: str
    order_by: str
    read: dict[str, str] = {}
    write: dict[str, str] = {}

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.record.__struct_fields__)


_LANGUAGE_OUT = {"language": "language::text"}
_LANGUAGE_IN = {"language": "CAST(CAST(:language AS text) AS regconfig)"}
_EMBEDDING_OUT = {"embedding": "embedding::text"}

#: Every kind, in the order an archive lists them and an import inserts them.
KINDS: tuple[KindSpec, ...] = (
    KindSpec("ontology_class", OntologyClass, "ontology_classes", "name"),
    KindSpec("ontology_predicate", OntologyPredicate, "ontology_predicates", "name"),
    KindSpec("document", Document, "documents", "id"),
    KindSpec("memory", Memory, "memories", "id"),
    KindSpec(
        "chunk", Chunk, "chunks", "memory_id, ordinal", _LANGUAGE_OUT | _EMBEDDING_OUT, _LANGUAGE_IN
    ),
    KindSpec("entity", Entity, "entities", "id"),
    KindSpec("entity_name", EntityName, "entity_names", "entity_id, norm_name"),
    KindSpec("mention", Mention, "mentions", "id"),
    KindSpec("edge", Edge, "edges", "id"),
    KindSpec(
        "summary_node", SummaryNode, "summary_nodes", "document_id, level, id", _EMBEDDING_OUT
    ),
    KindSpec("conversation", Conversation, "conversations", "id"),
    KindSpec(
        "conversation_turn", ConversationTurn, "conversation_turns", "conversation_id, ordinal"
    ),
)
