"""Request and response bodies of the HTTP API (msgspec structs)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar.params import PathParameter, QueryParameter
from msgspec import Meta

from knowmind.api.strict_body import StrictBody
from knowmind.contract.drafts import RelationIn
from knowmind.contract.limits import (
    HOPS_DEFAULT,
    K_DEFAULT,
    NO_NUL,
    SCOPE_ID_MAX_CHARS,
    SCOPE_PATTERN,
    FilledContent,
    Hops,
    K,
    MemoryType,
    NonEmptyTitle,
    Query,
    Reason,
    RelationCount,
    Role,
    ScopeId,
    ShortText,
    Speaker,
    TagList,
    Title,
    reject_nul,
    require_visible,
)
from knowmind.errors import InvalidInputError
from knowmind.recall.registry import STAGE_NAMES, StageName
from knowmind.services.memories import MemoryDraft, MemoryFilters

__all__ = [
    "AgentIdQuery",
    "MemoryIn",
    "OccurredAfterQuery",
    "OccurredBeforeQuery",
    "RecallFilters",
    "RecallIn",
    "SessionIdQuery",
    "SupersedeIn",
    "TenantIn",
    "TokenIn",
    "UserIdPath",
    "UserIdQuery",
]

Scope = Literal["read", "write", "admin"]


def scope_parameter(description: str) -> Any:
    """A query parameter naming a user, agent or session (``contract.limits.ScopeId``'s
    limits: the query string is not checked against the type's own)."""
    return QueryParameter(
        description=description,
        min_length=1,
        max_length=SCOPE_ID_MAX_CHARS,
        pattern=SCOPE_PATTERN,
    )


#: An end user's id in a path, documented with ``ScopeId``'s limits (``scope_id`` checks it).
UserIdPath = Annotated[
    str,
    PathParameter(
        description="the end user's id, as sent in ``user_id``",
        min_length=1,
        max_length=SCOPE_ID_MAX_CHARS,
        pattern=SCOPE_PATTERN,
    ),
]


def scope_id(value: str, field: str) -> str:
    """A user, agent or session id from a path: ``ScopeId``'s limits, or 422 naming it."""
    try:
        return msgspec.convert(value, ScopeId)
    except msgspec.ValidationError as exc:
        raise InvalidInputError(field, str(exc)) from None


#: An RFC 3339 instant as a query parameter: a date, a time with seconds, an optional
#: fraction and offset (what the JSON bodies' instants take; one without offset is UTC).
INSTANT_PATTERN = (
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]"
    r":[0-5][0-9](\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):?[0-5][0-9])?$"
)


def instant_parameter(description: str) -> Any:
    """A query parameter holding an instant (parsed by ``query_instant``)."""
    return QueryParameter(description=description, max_length=40, pattern=INSTANT_PATTERN)


#: The query parameters of a list or export narrowed to one scope or an event-time window.
UserIdQuery = Annotated[str | None, scope_parameter("of this end user")]
AgentIdQuery = Annotated[str | None, scope_parameter("of this agent")]
SessionIdQuery = Annotated[str | None, scope_parameter("of this session")]
OccurredAfterQuery = Annotated[
    str | None, instant_parameter("event time at or after this instant (RFC 3339)")
]
OccurredBeforeQuery = Annotated[
    str | None, instant_parameter("event time before this instant (RFC 3339)")
]


def query_instant(value: str | None, field: str) -> datetime | None:
    """An instant from a query string, read by the rules of the JSON bodies' instants (422
    naming ``field`` when it is none, e.g. the 30th of February)."""
    if value is None:
        return None
    try:
        return msgspec.json.decode(msgspec.json.encode(value), type=datetime)
    except msgspec.ValidationError:
        raise InvalidInputError(field, "not an RFC 3339 date and time") from None


#: An ISO 8601 instant (one without an offset is read as UTC), years 1 to 9999 in UTC.
EventTime = Annotated[
    datetime,
    Meta(
        description="when it happened or was said (ISO 8601; UTC when no offset); "
        "default: when it is stored",
        extra_json_schema={"format": "date-time"},
    ),
]


class TenantIn(StrictBody):
    name: Annotated[str, Meta(min_length=1, max_length=200, pattern=NO_NUL)]
    language: Annotated[str, Meta(min_length=1, max_length=63, pattern=r"^[a-z_]+$")] | None = None


class TokenIn(StrictBody):
    scopes: Annotated[list[Scope], Meta(min_length=1, max_length=3)]
    user_id: (
        Annotated[
            ScopeId,
            Meta(
                description="bind the token to this end user: its writes are that user's, it "
                "reads that user's memories and the tenant's shared ones"
            ),
        ]
        | None
    ) = None


class MemoryIn(StrictBody):
    """Unknown keys are refused (422 naming them; MCP's knowmind_store_memory ignores them)."""

    content: FilledContent
    title: Title | None = None
    memory_type: MemoryType = "semantic"
    tags: TagList = msgspec.field(default_factory=list)
    source: ShortText | None = None
    domain: ShortText | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    relations: Annotated[list[RelationIn], RelationCount] = msgspec.field(default_factory=list)
    occurred_at: EventTime | None = None
    speaker: Annotated[Speaker, Meta(description="who said it (a name)")] | None = None
    role: Annotated[Role, Meta(description="the speaker's role: user, assistant, …")] | None = None
    user_id: Annotated[ScopeId, Meta(description="the end user it belongs to")] | None = None
    agent_id: Annotated[ScopeId, Meta(description="the agent it belongs to")] | None = None
    session_id: Annotated[ScopeId, Meta(description="the session it belongs to")] | None = None


class SupersedeIn(StrictBody):
    new_content: FilledContent
    new_title: NonEmptyTitle | None = None
    update_reason: Reason | None = None


class RecallFilters(StrictBody):
    memory_type: MemoryType | None = None
    tags: Annotated[list[ShortText], Meta(max_length=20)] = msgspec.field(default_factory=list)
    source: ShortText | None = None
    domain: ShortText | None = None
    document_id: UUID | None = None
    user_id: ScopeId | None = None
    agent_id: ScopeId | None = None
    session_id: ScopeId | None = None
    occurred_after: Annotated[datetime, _moment("event time at or after this instant")] | None = (
        None
    )
    occurred_before: Annotated[datetime, _moment("event time before this instant")] | None = None


def memory_filters(
    f: RecallFilters | None, as_of: datetime | None = None, known_at: datetime | None = None
) -> MemoryFilters:
    """A body's filters (and time) as the recall's ``MemoryFilters``."""
    return (f or RecallFilters()).into(MemoryFilters, as_of=as_of, known_at=known_at)


def _moment(description: str) -> Meta:
    """An RFC 3339 timestamp (one without an offset is read as UTC)."""
    return Meta(description=description, extra_json_schema={"format": "date-time"})


class RecallIn(StrictBody):
    query: Query
    k: K = K_DEFAULT
    filters: RecallFilters | None = None
    hops: Hops = HOPS_DEFAULT
    stages: Annotated[list[StageName], Meta(min_length=1, max_length=len(STAGE_NAMES))] | None = (
        None
    )
    rerank: bool | None = None
    weights: dict[StageName, Annotated[float, Meta(ge=0.0, le=10.0)]] | None = None
    fusion: Annotated[
        Literal["rrf", "convex"] | None,
        Meta(description="how the stages' lists are fused before the ranker (default rrf)"),
    ] = None
    ranker: Annotated[
        Literal["learned", "rrf"] | None,
        Meta(description="`learned` (default) or `rrf` (the fused order as it is)"),
    ] = None
    min_score: Annotated[
        float,
        Meta(ge=0.0, le=1.0, description="drop results whose score is below this (0–1)"),
    ] = 0.0
    explain: bool = False
    as_of: Annotated[datetime, _moment("valid time: what was true then")] | None = None
    known_at: Annotated[datetime, _moment("transaction time: what we knew then")] | None = None
    reference_time: (
        Annotated[
            datetime,
            _moment(
                'what a time in the question is relative to ("last week", "gestern"); '
                "default: as_of, else now"
            ),
        ]
        | None
    ) = None

    def __post_init__(self) -> None:
        require_visible(self.query, "query")


def memory_draft(data: MemoryIn) -> MemoryDraft:
    """A validated body as the service's draft (REST single and batch); metadata may not hold
    NUL characters anywhere (PostgreSQL jsonb cannot store them)."""
    reject_nul(data.metadata, "metadata")
    return data.into(MemoryDraft, tags=tuple(data.tags), relations=tuple(data.relations))
