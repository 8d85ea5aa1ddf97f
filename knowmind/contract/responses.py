"""Records the server answers with, defined once: the REST API encodes them (their names are
the OpenAPI schemas' names), the SDK (``knowmind.client``) decodes them. msgspec only, so the
SDK needs nothing of the server; unknown fields are ignored on decoding (msgspec's default), so a
newer server may add some without breaking an older client."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from msgspec import Meta, Struct

__all__ = ["AnswerOut", "AnswerPassage", "Citation", "JobOut", "RecallHit", "RecallOut"]


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
