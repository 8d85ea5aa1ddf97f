"""Records the server answers with, defined once: the REST API encodes them (their names are
the OpenAPI schemas' names), the SDK (``knowmind.client``) decodes them. msgspec only, so the
SDK needs nothing of the server; unknown fields are ignored on decoding (msgspec's default), so a
newer server may add some without breaking an older client."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from msgspec import Meta, Struct

from knowmind.contract.records import EntityFields, MemoryText, TenantFields

__all__ = [
    "AnswerOut",
    "AnswerPassage",
    "Citation",
    "ConversationOut",
    "DocumentOut",
    "EntityHit",
    "EntityOut",
    "EntitySearchOut",
    "FactUpdateOut",
    "HistoryEventOut",
    "JobOut",
    "JobRef",
    "LinkOut",
    "MemoryHistoryOut",
    "MemoryList",
    "MemoryOut",
    "NamedNodeOut",
    "NodeRef",
    "RecallHit",
    "RecallOut",
    "RelationOut",
    "RelationsOut",
    "RememberOut",
    "SpeakerOut",
    "TenantOut",
    "TenantSettingsOut",
    "TokenOut",
    "TurnOut",
    "UnlinkOut",
]


class RecallHit(Struct):
    memory_id: UUID
    chunk_id: UUID
    title: str | None
    content: str
    source: str | None
    memory_type: str
    created_at: datetime
    score: Annotated[
        float,
        Meta(description="the probability (0–1) that this memory answers the question"),
    ]
    stages: dict[str, int | None]
    rerank_score: float | None = None
    fused: Annotated[
        float, Meta(description="the fused (RRF) score as a share of the best possible")
    ] = 0.0
    explanation: Annotated[
        dict[str, Any] | None,
        Meta(description="with explain: the ranker's raw score and the features it read"),
    ] = None
    kind: Annotated[
        Literal["preference", "fact", "update"] | None,
        Meta(description="the chunk is a statement of this kind (tagged by knowmind's client)"),
    ] = None
    occurred_at: (
        Annotated[
            datetime,
            Meta(
                description="when it happened or was said",
                extra_json_schema={"format": "date-time"},
            ),
        ]
        | None
    ) = None
    speaker: str | None = None
    role: str | None = None


class RecallOut(Struct):
    results: list[RecallHit]
    timings_ms: dict[str, float]
    degraded: bool
    degraded_reasons: list[str]
    ranker: str = "learned"
    explain: dict[str, Any] | None = None


class JobOut(Struct):
    id: UUID
    kind: str
    status: str  # "pending" | "running" | "done" | "failed"
    attempts: int
    last_error: str | None
    result: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    # a job that runs in steps (a large document): how far it has come, e.g. chunks embedded
    progress: dict[str, Any] | None = None


class Citation(Struct):
    marker: int
    memory_id: UUID
    chunk_id: UUID
    title: str | None


class AnswerPassage(Struct):
    marker: int
    memory_id: UUID
    chunk_id: UUID
    title: str | None
    content: str
    score: float
    stages: list[str]
    summary_level: Annotated[
        int | None,
        Meta(description="raptor: a summary node of this level (chunk_id is the node's id)"),
    ] = None


class AnswerOut(Struct):
    answer: str | None
    supported: bool
    citations: list[Citation]
    passages: list[AnswerPassage]
    method: str
    method_details: dict[str, Any]
    degraded: bool
    degraded_reasons: list[str]
    timings_ms: dict[str, float]
    tokens: dict[str, int]
    model: str | None
    conversation_id: Annotated[
        str | None,
        Meta(description="the request's conversation_id (a UUID in its canonical form)"),
    ] = None


class JobRef(Struct):
    id: UUID
    status: str
    result: dict[str, Any] | None = None
    last_error: str | None = None


class RememberOut(Struct):
    id: UUID
    status: Literal["created", "unchanged"]
    chunks: int
    job_id: UUID | None = None
    job: JobRef | None = None


class MemoryOut(MemoryText, frozen=True):
    id: UUID
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    document_id: UUID | None
    chunks: int
    occurred_at: datetime
    speaker: str | None = None
    role: str | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None


class MemoryList(Struct):
    items: list[MemoryOut]
    next_cursor: str | None


class EntityOut(EntityFields, frozen=True):
    created: bool | None = None


class EntityHit(Struct):
    id: UUID
    name: str
    entity_class: str
    aliases: list[str]
    score: float


class EntitySearchOut(Struct):
    results: list[EntityHit]


class LinkOut(Struct):
    edge_id: UUID
    inverse_edge_id: UUID | None


class UnlinkOut(Struct):
    removed: int


class NodeRef(Struct):
    id: UUID
    kind: Literal["memory", "entity"]
    title_or_name: str | None
    entity_class: str | None = None


class RelationOut(Struct):
    predicate: str
    direction: Literal["out", "in"]
    confidence: float
    derived: bool
    node: NodeRef
    edge_id: UUID | None = None  # None: a mention
    valid_from: datetime | None = None
    valid_to: datetime | None = None  # set: the relation no longer holds (``?closed=true``)


class RelationsOut(Struct):
    relations: list[RelationOut]


class TenantOut(TenantFields, frozen=True):
    """A tenant as the API shows it."""


class TokenOut(Struct):
    id: UUID
    tenant_id: UUID
    token: str
    scopes: list[str]
    created_at: datetime
    user_id: str | None = None


class TenantSettingsOut(Struct):
    llm_model: Annotated[str | None, Meta(description="null: the server's model")]
    multi_query: bool
    extraction_prompt: Annotated[
        str | None, Meta(description="the LLM graph extractor's prompt; null: the built-in one")
    ] = None


class NamedNodeOut(Struct):
    id: UUID
    name: str | None  # None: the entity was erased since
    entity_class: str | None


class FactUpdateOut(Struct):
    """``subject -predicate->`` changed from ``old_object`` to ``new_object`` at ``changed_at``
    (valid time): the old edge closed, the new one holds."""

    predicate: str
    subject: NamedNodeOut
    old_object: NamedNodeOut
    new_object: NamedNodeOut
    old_edge_id: UUID
    new_edge_id: UUID
    changed_at: datetime
    decided_by: Literal["rule", "llm"]  # llm: the extractor's model proposed the new relation
    audit_id: int
    model: str | None = None
    proposal: dict[str, Any] | None = None  # the relation the model proposed (ids)


class HistoryEventOut(Struct):
    at: datetime
    event: Literal["superseded_by", "supersedes", "fact_closed", "fact_replaced"]
    memory_id: UUID | None  # the other memory
    automatic: bool
    reason: str | None
    actor: str | None  # who wrote the change (None: not recorded, as for update_fact)
    memory_closed: bool  # this event ended the memory's validity
    fact: FactUpdateOut | None = None


class MemoryHistoryOut(Struct):
    memory_id: UUID
    valid_from: datetime
    valid_to: datetime | None
    events: list[HistoryEventOut]


class DocumentOut(Struct):
    """``accepted`` (202): a large document is stored by the job ``job_id`` (``id`` is null
    until then; the job's result names it); otherwise ``job_id`` is the extraction job."""

    id: UUID | None
    memory_id: UUID | None
    chunks: int
    status: Literal["created", "replaced", "unchanged", "accepted"]
    job_id: UUID | None = None
    tree_job_id: UUID | None = None  # build_tree: the job that builds the summary tree
    tree_note: str | None = None  # build_tree: why no tree is built
    embedded_by: str = "server"
    embedding_note: str | None = None


class TurnOut(Struct):
    index: int  # in the request's messages
    turn: int  # position in the session
    status: Literal["created", "unchanged"]
    id: UUID | None
    chunks: int = 0
    job_id: UUID | None = None


class SpeakerOut(Struct):
    name: str
    entity_class: str
    id: UUID | None


class ConversationOut(Struct):
    session_id: str
    status: Literal["created", "unchanged"]  # created: at least one turn was new
    created: int
    unchanged: int
    turns: list[TurnOut]
    speakers: list[SpeakerOut]
