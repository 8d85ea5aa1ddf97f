"""What the server answers, as typed objects (unknown fields are ignored: a newer server may add
some without breaking an older client)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec

__all__ = [
    "BatchItem",
    "BatchResult",
    "Conversation",
    "Document",
    "Hit",
    "Job",
    "KnowmindAPIError",
    "Memory",
    "MemoryPage",
    "Recall",
    "Remembered",
    "Speaker",
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


class Hit(msgspec.Struct):
    memory_id: UUID
    chunk_id: UUID
    title: str | None
    content: str
    source: str | None
    memory_type: str
    created_at: datetime
    score: float  # the probability (0–1) that this memory answers the question
    stages: dict[str, int | None] = msgspec.field(default_factory=dict)
    rerank_score: float | None = None
    fused: float = 0.0
    explanation: dict[str, Any] | None = None
    occurred_at: datetime | None = None  # when it happened or was said
    speaker: str | None = None
    role: str | None = None


class Recall(msgspec.Struct):
    results: list[Hit]
    timings_ms: dict[str, float]
    degraded: bool
    degraded_reasons: list[str]
    ranker: str = "learned"
    explain: dict[str, Any] | None = None


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


class Job(msgspec.Struct):
    id: UUID
    kind: str
    status: str  # "pending" | "running" | "done" | "failed"
    attempts: int = 0
    result: dict[str, Any] | None = None
    last_error: str | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None
