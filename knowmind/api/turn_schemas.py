"""``POST /v1/memories/conversation`` (and a session line of ``knowmind import``): a
conversation remembered turn by turn (``services.turns``)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from knowmind.api.errors import field_of_message
from knowmind.api.outputs import conversation_result
from knowmind.api.schemas import EventTime
from knowmind.api.strict_body import StrictBody
from knowmind.contract.limits import (
    FilledContent,
    MessageCount,
    MessageId,
    Role,
    ScopeId,
    Speaker,
    TurnOffset,
    reject_nul,
)
from knowmind.contract.responses import ConversationOut
from knowmind.errors import InvalidInputError
from knowmind.services.batch import ItemError
from knowmind.services.turns import ConversationDraft, ConversationResult, TurnDraft

__all__ = [
    "ConversationIn",
    "MessageIn",
    "conversation_draft",
    "conversation_or_error",
    "conversation_out",
]


class MessageIn(StrictBody):
    """One message of the conversation: it becomes one memory."""

    content: FilledContent
    speaker: (
        Annotated[Speaker, Meta(description="who said it (a name): a Person entity")] | None
    ) = None
    role: Annotated[Role, Meta(description="user, assistant, …")] | None = None
    occurred_at: EventTime | None = None
    id: (
        Annotated[
            MessageId,
            Meta(description="the message's id in the conversation (default: its position)"),
        ]
        | None
    ) = None


class ConversationIn(StrictBody):
    """A conversation (a session): its messages in order, up to 1,000 a call."""

    messages: Annotated[list[MessageIn], MessageCount]
    session_id: (
        Annotated[ScopeId, Meta(description="default: derived from the first message")] | None
    ) = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    user_id: Annotated[ScopeId, Meta(description="the end user it belongs to")] | None = None
    agent_id: Annotated[ScopeId, Meta(description="the agent it belongs to")] | None = None
    occurred_at: (
        Annotated[EventTime, Meta(description="the event time of messages without their own")]
        | None
    ) = None
    offset: Annotated[
        TurnOffset,
        Meta(description="the position of the first message in the session (a later part)"),
    ] = 0


def conversation_draft(data: ConversationIn) -> ConversationDraft:
    """A validated body as the service's draft (NUL in the metadata is a 422 naming it; the
    service checks each message's content)."""
    reject_nul(data.metadata, "metadata")
    return data.into(ConversationDraft, messages=tuple(m.into(TurnDraft) for m in data.messages))


def conversation_or_error(item: Any) -> ConversationDraft | ItemError:
    """A conversation (a session line of ``knowmind import``) validated like a body of
    ``POST /v1/memories/conversation``."""
    try:
        return conversation_draft(msgspec.convert(item, ConversationIn))
    except msgspec.ValidationError as exc:
        return ItemError(*field_of_message(str(exc)))
    except InvalidInputError as exc:
        return ItemError(exc.field, exc.message)


def conversation_out(result: ConversationResult) -> ConversationOut:
    return msgspec.convert(conversation_result(result), ConversationOut)
