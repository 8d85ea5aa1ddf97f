"""Bodies of ``POST /v1/answer``."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

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

__all__ = ["AnswerIn"]


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
