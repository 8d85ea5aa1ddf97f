"""Field constraints shared by the REST bodies (``api/schemas.py``) and the MCP input schemas
(``mcp/catalogue.py``). Each constraint is an annotated type: msgspec enforces it on REST
bodies, and ``json_schema`` turns the same type into the MCP tool's JSON Schema."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from msgspec import Meta

from knowmind.errors import InvalidInputError

__all__ = [
    "CHUNK_PLACEHOLDER",
    "CLASS_PATTERN",
    "EXTRACTION_PROMPT_MAX_CHARS",
    "HOPS_DEFAULT",
    "INVISIBLE",
    "K_DEFAULT",
    "MAX_MESSAGES",
    "MAX_TURN_OFFSET",
    "MEMORY_TYPES",
    "NO_NUL",
    "PREDICATE_PATTERN",
    "SCOPE_PATTERN",
    "STATEMENT_KINDS",
    "Aliases",
    "ClassName",
    "Confidence",
    "Content",
    "ConversationId",
    "Description",
    "FilledContent",
    "FilledTitle",
    "Hops",
    "K",
    "MemoryType",
    "MessageCount",
    "MessageId",
    "MinScore",
    "ModelName",
    "Name",
    "OptionalClassName",
    "PredicateName",
    "Query",
    "Reason",
    "RelationCount",
    "Role",
    "ScopeId",
    "ShortText",
    "Speaker",
    "TagList",
    "Text",
    "Title",
    "TurnOffset",
    "conversation_key",
    "json_schema",
    "reject_nul",
    "require_visible",
]

#: PostgreSQL text and jsonb cannot hold NUL characters.
NO_NUL = r"^[^\x00]*$"
PREDICATE_PATTERN = r"^[A-Z][A-Z0-9_]*$"
CLASS_PATTERN = r"^[A-Z][A-Za-z0-9]*$"
MEMORY_TYPES = ("semantic", "episodic", "procedural", "reference")
# kinds of statement a chunk may be tagged with (chunks.kind, migration 0008)
STATEMENT_KINDS = ("preference", "fact", "update")
# A tenant's prompt for the LLM graph extractor: the chunk's text replaces the placeholder.
CHUNK_PLACEHOLDER = "__CHUNK__"
EXTRACTION_PROMPT_MAX_CHARS = 8000

QUERY_MAX_CHARS = 4000
K_MIN, K_MAX, K_DEFAULT = 1, 25, 5
HOPS_MIN, HOPS_MAX, HOPS_DEFAULT = 0, 3, 2
TITLE_MAX_CHARS = 500
SHORT_TEXT_MAX_CHARS = 500
NAME_MAX_CHARS = 300
CLASS_MAX_CHARS = 60
PREDICATE_MAX_CHARS = 60
DESCRIPTION_MAX_CHARS = 4000
REASON_MAX_CHARS = 2000
MAX_TAGS = 100
SCOPE_ID_MAX_CHARS = 200
ROLE_MAX_CHARS = 60
#: user, agent and session ids: no control characters (they travel in a database setting)
SCOPE_PATTERN = r"^[^\x00-\x1f\x7f]*$"
MAX_RELATIONS = 50
MAX_ALIASES = 50

Text = Annotated[str, Meta(pattern=NO_NUL, description="text without NUL characters")]
Content = Annotated[str, Meta(min_length=1, pattern=NO_NUL)]
#: Characters that show nothing (a regular-expression class, read alike by Python and
#: ECMA-262): controls, spaces and separators, the soft hyphen, zero-width spaces and joiners,
#: direction marks and embeddings, the word joiner and invisible operators, variation selectors,
#: the byte order mark, Hangul fillers.
INVISIBLE = (
    r"\x00-\x20\x7f-\xa0\xad\u034f\u061c\u115f\u1160\u1680\u17b4\u17b5\u180b-\u180f"
    r"\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164\ufe00-\ufe0f\ufeff\uffa0"
)
_BLANK = re.compile(f"[{INVISIBLE}]*")
#: The schema's way of saying "a visible character somewhere" (``require_visible`` checks it).
NOT_BLANK: dict[str, Any] = {"not": {"pattern": f"^[{INVISIBLE}]*$"}}
FilledContent = Annotated[str, Meta(min_length=1, pattern=NO_NUL, extra_json_schema=NOT_BLANK)]
ShortText = Annotated[str, Meta(min_length=1, max_length=SHORT_TEXT_MAX_CHARS, pattern=NO_NUL)]
Title = Annotated[str, Meta(max_length=TITLE_MAX_CHARS, pattern=NO_NUL)]
NonEmptyTitle = Annotated[str, Meta(min_length=1, max_length=TITLE_MAX_CHARS, pattern=NO_NUL)]
FilledTitle = Annotated[
    str,
    Meta(min_length=1, max_length=TITLE_MAX_CHARS, pattern=NO_NUL, extra_json_schema=NOT_BLANK),
]
Name = Annotated[str, Meta(min_length=1, max_length=NAME_MAX_CHARS, pattern=NO_NUL)]
ClassName = Annotated[str, Meta(min_length=1, max_length=CLASS_MAX_CHARS, pattern=CLASS_PATTERN)]
#: An entity class on an inline relation (REST accepts the empty string there).
OptionalClassName = Annotated[str, Meta(max_length=CLASS_MAX_CHARS, pattern=CLASS_PATTERN)]
PredicateName = Annotated[
    str, Meta(min_length=1, max_length=PREDICATE_MAX_CHARS, pattern=PREDICATE_PATTERN)
]
Description = Annotated[str, Meta(max_length=DESCRIPTION_MAX_CHARS, pattern=NO_NUL)]
Reason = Annotated[str, Meta(max_length=REASON_MAX_CHARS, pattern=NO_NUL)]
Confidence = Annotated[float, Meta(ge=0.0, le=1.0)]
MinScore = Annotated[
    float,
    Meta(ge=0.0, le=1.0, description="drop results whose score (0–1 probability) is below this"),
]
Query = Annotated[
    str,
    Meta(min_length=1, max_length=QUERY_MAX_CHARS, pattern=NO_NUL, extra_json_schema=NOT_BLANK),
]
K = Annotated[int, Meta(ge=K_MIN, le=K_MAX)]
ModelName = Annotated[str, Meta(min_length=1, max_length=200, pattern=r"^\S+$")]
Hops = Annotated[int, Meta(ge=HOPS_MIN, le=HOPS_MAX, description="graph hops; 0 = no graph stage")]
MemoryType = Literal["semantic", "episodic", "procedural", "reference"]
TagList = Annotated[list[ShortText], Meta(max_length=MAX_TAGS)]
Aliases = Annotated[list[Name], Meta(max_length=MAX_ALIASES)]
RelationCount = Meta(max_length=MAX_RELATIONS)
#: A memory's scope inside its tenant: the end user, agent or session it belongs to.
ScopeId = Annotated[str, Meta(min_length=1, max_length=SCOPE_ID_MAX_CHARS, pattern=SCOPE_PATTERN)]
#: Who said it (a name) and in which role (user, assistant, …).
Speaker = Annotated[str, Meta(min_length=1, max_length=NAME_MAX_CHARS, pattern=NO_NUL)]
Role = Annotated[str, Meta(min_length=1, max_length=ROLE_MAX_CHARS, pattern=NO_NUL)]
#: A remembered conversation: its messages per call, a message's own id (it identifies the
#: turn across calls), the position of the call's first message in its session.
MAX_MESSAGES = 1000
MAX_TURN_OFFSET = 1_000_000
MessageCount = Meta(min_length=1, max_length=MAX_MESSAGES)
MessageId = Annotated[str, Meta(min_length=1, max_length=SCOPE_ID_MAX_CHARS, pattern=SCOPE_PATTERN)]
TurnOffset = Annotated[int, Meta(ge=0, le=MAX_TURN_OFFSET)]
#: A thread of questions to the answer endpoint, named by the client (migration 0022).
ConversationId = Annotated[
    str,
    Meta(
        min_length=1,
        max_length=SCOPE_ID_MAX_CHARS,
        pattern=SCOPE_PATTERN,
        description="a thread of turns, named by the client (1-200 characters, no control "
        "characters; created on first use); follow-ups are read with it",
    ),
]
_UUID_FORM = re.compile(r"[0-9a-fA-F]{8}(-?[0-9a-fA-F]{4}){3}-?[0-9a-fA-F]{12}")


def json_schema(kind: Any, description: str | None = None, **extra: Any) -> dict[str, Any]:
    """The JSON Schema of an annotated type, for an MCP tool input.

    The NUL pattern is left out: the MCP validator refuses NUL in every string anyway, and
    clients need not see it. The type's own description gives way to ``description``.
    """
    schema = _strip_nul(msgspec.json.schema(kind))
    if description is not None:
        schema["description"] = description
    return schema | extra


def _strip_nul(schema: dict[str, Any]) -> dict[str, Any]:
    cleaned = {k: v for k, v in schema.items() if not (k == "pattern" and v == NO_NUL)}
    if cleaned.get("description") == "text without NUL characters":
        del cleaned["description"]
    if isinstance(cleaned.get("items"), dict):
        cleaned["items"] = _strip_nul(cleaned["items"])
    return cleaned


def conversation_key(conversation_id: str) -> str:
    """The stored name of a conversation: a UUID (any case, with or without hyphens, as
    accepted when only UUIDs were) in its canonical form, any other string as it is."""
    if _UUID_FORM.fullmatch(conversation_id):
        return str(UUID(conversation_id))
    return conversation_id


def require_visible(value: str | None, field: str) -> None:
    """Refuse text with no visible character (only spaces, zero-width or other invisible
    characters): 422 naming the field."""
    if value is not None and _BLANK.fullmatch(value):
        raise InvalidInputError(field, "must contain a visible character")


def reject_nul(value: Any, field: str) -> None:
    """Refuse NUL anywhere in a free-form value (keys and items of jsonb included)."""
    if isinstance(value, str) and "\x00" in value:
        raise InvalidInputError(field, "must not contain NUL characters")
    if isinstance(value, dict):
        for key, item in value.items():
            reject_nul(key, field)
            reject_nul(item, field)
    elif isinstance(value, list):
        for item in value:
            reject_nul(item, field)
