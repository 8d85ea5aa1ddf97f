"""Bodies of ``POST /v1/answer``."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from msgspec import Meta, Struct

from knowmind.answer.methods import METHOD_NAMES, method_pattern
from knowmind.api.schemas import RecallFilters
from knowmind.api.strict_body import StrictBody
from knowmind.contract.limits import (
    K_DEFAULT,
    ConversationId,
    K,
    ModelName,
    Query,
    require_visible,
)

__all__ = ["AnswerIn", "AnswerOut"]


# Checked by the service (a 422 that lists the methods); the pattern documents the same.
Method = Annotated[
    str,
    Meta(
        max_length=40,
        description=f"one of {', '.join(METHOD_NAMES)} (any case)",
        extra_json_schema={"pattern": method_pattern()},
    ),
]


class AnswerIn(StrictBody):
    question: Query
    k: K = K_DEFAULT
    method: Method = "standard"
    rerank: bool | None = None
    compress: bool = False
    parent_context: bool = False
    filters: RecallFilters | None = None
    llm_model: ModelName | None = None
    max_tokens: Annotated[int, Meta(ge=16, le=2048)] = 256
    conversation_id: ConversationId | None = None
    share_conversation: Annotated[
        bool, Meta(description="a new conversation other tokens of the tenant may continue")
    ] = False
    stream: Annotated[bool, Meta(description="server-sent events: token …, done")] = False

    def __post_init__(self) -> None:
        require_visible(self.question, "question")


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
