"""What the server answers, as typed objects (unknown fields are ignored: a newer server may add
some without breaking an older client). The records the REST API answers with are shared with
it (``knowmind.contract.responses``, msgspec only): ``Hit``, ``Recall``, ``Job``, ``Answer``,
``Citation`` and ``Passage`` are the server's ``RecallHit``, ``RecallOut``, ``JobOut``,
``AnswerOut``, ``Citation`` and ``AnswerPassage``."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

from knowmind.contract.responses import AnswerOut as Answer
from knowmind.contract.responses import AnswerPassage as Passage
from knowmind.contract.responses import Citation
from knowmind.contract.responses import JobOut as Job
from knowmind.contract.responses import RecallHit as Hit
from knowmind.contract.responses import RecallOut as Recall

__all__ = [
    "Answer",
    "AnswerEvent",
    "BatchItem",
    "BatchResult",
    "Citation",
    "Conversation",
    "Document",
    "Entity",
    "EntityHit",
    "FactUpdate",
    "History",
    "HistoryEvent",
    "Hit",
    "Job",
    "KnowmindAPIError",
    "Link",
    "Memory",
    "MemoryPage",
    "NamedNode",
    "NodeRef",
    "Passage",
    "Recall",
    "Receipt",
    "Relation",
    "Remembered",
    "Speaker",
    "TenantSettings",
    "Token",
    "Turn",
]


class KnowmindAPIError(Exception):
    """An answer that is not a success: the status, the server's detail and the field it names
    (422, 409)."""

    def __init__(self, status: int, detail: str, field: str | None = None) -> None:
        super().__init__(f"{status}: {detail}")
        self.status = status
        self.detail = detail
        self.field = field


class Remembered(msgspec.Struct):
    id: UUID
    status: str  # "created" | "unchanged"
    chunks: int
    job_id: UUID | None = None


class Memory(msgspec.Struct):
    id: UUID
    title: str | None
    content: str
    memory_type: str
    created_at: datetime
    tags: list[str] = msgspec.field(default_factory=list)
    source: str | None = None
    domain: str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    document_id: UUID | None = None
    chunks: int = 0
    occurred_at: datetime | None = None  # when it happened or was said
    speaker: str | None = None
    role: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None


class MemoryPage(msgspec.Struct):
    items: list[Memory]
    next_cursor: str | None


class BatchItem(msgspec.Struct):
    index: int
    status: str  # "created" | "unchanged" | "error"
    id: UUID | None = None
    chunks: int = 0
    job_id: UUID | None = None
    error: dict[str, str] | None = None


class BatchResult(msgspec.Struct):
    created: int
    unchanged: int
    failed: int
    results: list[BatchItem]


class Turn(msgspec.Struct):
    """One message of a remembered conversation: the memory it is."""

    index: int  # in the messages given
    turn: int  # position in the session
    status: str  # "created" | "unchanged"
    id: UUID | None = None
    chunks: int = 0
    job_id: UUID | None = None


class Speaker(msgspec.Struct):
    name: str
    entity_class: str  # "Person" | "SoftwareAgent"
    id: UUID | None = None  # the entity its turns mention


class Conversation(msgspec.Struct):
    """What ``remember_conversation`` stored: a turn per message, in order."""

    session_id: str
    status: str  # "created" (a turn was new) | "unchanged"
    created: int
    unchanged: int
    turns: list[Turn] = msgspec.field(default_factory=list)
    speakers: list[Speaker] = msgspec.field(default_factory=list)


class Document(msgspec.Struct):
    id: UUID | None  # None while "accepted": the job stores it (see ``Job.result``)
    memory_id: UUID | None
    chunks: int
    status: str  # "created" | "replaced" | "unchanged" | "accepted"
    job_id: UUID | None = None
    embedded_by: str = "server"
    embedding_note: str | None = None


class Receipt(msgspec.Struct):
    """What an erasure removed (``erase_memory``, ``erase_document``, ``erase_user``): counts
    per kind (memories, chunks, vectors, tsvectors, mentions, edges, entities, jobs, …)."""

    erased: dict[str, int]
    graph_mirror: dict[str, int] = msgspec.field(default_factory=dict)
    audit_id: int | None = None
    user_id: str | None = None


class NamedNode(msgspec.Struct):
    id: UUID
    name: str | None  # None: erased since
    entity_class: str | None


class FactUpdate(msgspec.Struct):
    """``subject -predicate->`` changed from ``old_object`` to ``new_object`` at ``changed_at``."""

    predicate: str
    subject: NamedNode
    old_object: NamedNode
    new_object: NamedNode
    old_edge_id: UUID
    new_edge_id: UUID
    changed_at: datetime
    decided_by: str  # "rule" | "llm"
    audit_id: int
    model: str | None = None
    proposal: dict[str, Any] | None = None


class HistoryEvent(msgspec.Struct):
    at: datetime
    event: str  # "superseded_by" | "supersedes" | "fact_closed" | "fact_replaced"
    memory_id: UUID | None  # the other memory
    automatic: bool
    reason: str | None
    actor: str | None
    memory_closed: bool  # this event ended the memory's validity
    fact: FactUpdate | None = None


class History(msgspec.Struct):
    """A memory's supersessions and automatic fact updates (``history``)."""

    memory_id: UUID
    valid_from: datetime
    valid_to: datetime | None
    events: list[HistoryEvent]


class Entity(msgspec.Struct):
    id: UUID
    name: str
    entity_class: str
    description: str | None = None
    aliases: list[str] = msgspec.field(default_factory=list)
    origin: str = "api"
    confidence: float = 1.0
    created_at: datetime | None = None
    created: bool | None = None  # upsert_entity: True when this call created it


class EntityHit(msgspec.Struct):
    id: UUID
    name: str
    entity_class: str
    aliases: list[str]
    score: float


class Link(msgspec.Struct):
    edge_id: UUID
    inverse_edge_id: UUID | None


class NodeRef(msgspec.Struct):
    id: UUID
    kind: str  # "memory" | "entity"
    title_or_name: str | None
    entity_class: str | None = None


class Relation(msgspec.Struct):
    predicate: str
    direction: str  # "out" | "in"
    confidence: float
    derived: bool
    node: NodeRef
    edge_id: UUID | None = None  # None: a mention
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class AnswerEvent(msgspec.Struct):
    """One event of ``answer_stream``: ``token`` with a piece of ``text``, then ``done`` with
    the whole ``result``."""

    event: str  # "token" | "done"
    text: str = ""
    result: Answer | None = None


class TenantSettings(msgspec.Struct):
    llm_model: str | None
    multi_query: bool
    extraction_prompt: str | None = None


class Token(msgspec.Struct):
    """A new token: ``token`` is shown this once."""

    id: UUID
    tenant_id: UUID
    token: str
    scopes: list[str]
    created_at: datetime
    user_id: str | None = None
