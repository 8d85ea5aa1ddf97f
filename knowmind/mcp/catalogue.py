"""What each MCP tool is: name, aliases, scope, input schema and annotations (no behaviour).

Every limit comes from ``knowmind.contract.limits``, the types the REST bodies use too, so both
doors accept the same input (``tests/test_contract.py`` compares them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict, Unpack

from knowmind.answer.methods import METHOD_NAMES, method_pattern
from knowmind.contract import limits as c
from knowmind.contract.limits import json_schema as _schema

__all__ = ["SPECS", "ToolSpec"]


def _int(description: str, minimum: int, maximum: int, default: int) -> dict[str, Any]:
    return {
        "type": "integer",
        "description": description,
        "minimum": minimum,
        "maximum": maximum,
        "default": default,
    }


def _uuid(description: str) -> dict[str, Any]:
    return {"type": "string", "format": "uuid", "description": description}


def _confidence(description: str) -> dict[str, Any]:
    return _schema(c.Confidence, description, default=1.0)


def _object(
    properties: dict[str, dict[str, Any]],
    required: tuple[str, ...] = (),
    *,
    extra_keys: bool = False,
) -> dict[str, Any]:
    """``extra_keys``: unknown keys are accepted and ignored instead of refused."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = list(required)
    if not extra_keys:
        schema["additionalProperties"] = False
    return schema


_RELATION = _object(
    {
        "predicate": _schema(
            c.PredicateName,
            "relation type from the catalogue (knowmind_get_schema), e.g. WORKS_FOR",
        ),
        "object": _schema(c.Name, "name of the related thing; found or created"),
        "object_class": _schema(
            c.OptionalClassName,
            "entity class of the object, e.g. Person, Organization (needed when ambiguous)",
        ),
        "object_description": _schema(c.Description),
        "confidence": _confidence("0..1"),
        "subject": _schema(c.Name, "optional subject entity name (default: the new memory itself)"),
        "subject_class": _schema(
            c.OptionalClassName, "entity class of the subject (needed when ambiguous)"
        ),
    },
    ("predicate", "object"),
    extra_keys=True,
)
_RELATIONS = _schema(
    Annotated[list[Any], c.RelationCount],
    "edges drawn from the new memory to found-or-created entities",
    items=_RELATION,
)
_QUERY = _schema(c.Query, "the question or search text, any language")
_K = _schema(c.K, "number of results", default=c.K_DEFAULT)
_HOPS = _schema(c.Hops, "graph hops (0 = text/vector only)", default=c.HOPS_DEFAULT)
_REFERENCE_TIME = {
    "type": "string",
    "format": "date-time",
    "description": 'what a time in the question is relative to ("last week", "gestern"); '
    "ISO-8601, default: as_of, else now",
}
_MIN_SCORE = _schema(
    c.MinScore,
    "drop results whose score (the probability, 0-1, that they answer) is below this",
    default=0.0,
)
_MEMORY_TYPE = {"type": "string", "enum": list(c.MEMORY_TYPES), "default": "semantic"}


def _instant(description: str) -> dict[str, Any]:
    return {"type": "string", "format": "date-time", "description": description}


_SCOPES = {
    "user_id": _schema(c.ScopeId, "the end user it belongs to"),
    "agent_id": _schema(c.ScopeId, "the agent it belongs to"),
    "session_id": _schema(c.ScopeId, "the session it belongs to"),
}
#: Recall filters: one user's, agent's or session's memories, an event-time window.
_RECALL_FILTERS = {
    "user_id": _schema(c.ScopeId, "only this end user's memories"),
    "agent_id": _schema(c.ScopeId, "only this agent's memories"),
    "session_id": _schema(c.ScopeId, "only this session's memories"),
    "occurred_after": _instant("event time at or after this ISO-8601 instant (UTC when no offset)"),
    "occurred_before": _instant("event time before this ISO-8601 instant (UTC when no offset)"),
}
_NODE = "id of a memory or entity"
_MESSAGE = _object(
    {
        "content": _schema(c.Content, "what was said"),
        "speaker": _schema(c.Speaker, "who said it (a name; becomes a Person entity)"),
        "role": _schema(c.Role, "the speaker's role: user, assistant, …"),
        "occurred_at": _instant("when it was said (ISO 8601; UTC when no offset)"),
        "id": _schema(c.MessageId, "the message's id in the conversation (default: its position)"),
    },
    ("content",),
)


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    title: str
    description: str
    scope: Literal["read", "write"]
    input_schema: dict[str, Any]
    read_only: bool
    destructive: bool = False
    idempotent: bool = True
    aliases: tuple[str, ...] = ()
    # it changes what the whole tenant shares (documents, the graph): refused to a token
    # bound to one end user
    tenant_wide: bool = False

    def describe(self, name: str | None = None) -> dict[str, Any]:
        """The ``tools/list`` entry, under ``name`` (an alias) or the current name."""
        description = self.description
        if name is not None and name != self.name:
            description = f"Deprecated alias of {self.name}. {description}"
        return {
            "name": name or self.name,
            "title": self.title,
            "description": description,
            "inputSchema": self.input_schema,
            "annotations": {
                "title": self.title,
                "readOnlyHint": self.read_only,
                "destructiveHint": self.destructive,
                "idempotentHint": self.idempotent,
                "openWorldHint": False,
            },
        }


class _Hints(TypedDict, total=False):
    destructive: bool
    idempotent: bool
    aliases: tuple[str, ...]
    tenant_wide: bool


def _read(
    name: str, title: str, description: str, schema: dict[str, Any], **hints: Unpack[_Hints]
) -> ToolSpec:
    """A tool that only reads (read scope, read-only hint)."""
    return ToolSpec(name, title, description, "read", schema, read_only=True, **hints)


def _write(
    name: str, title: str, description: str, schema: dict[str, Any], **hints: Unpack[_Hints]
) -> ToolSpec:
    """A tool that changes the tenant's data (write scope)."""
    return ToolSpec(name, title, description, "write", schema, read_only=False, **hints)


SPECS: tuple[ToolSpec, ...] = (
    _read(
        "knowmind_recall_memories",
        "Recall memories",
        "Hybrid recall over the tenant's memories and documents (full text + vector + graph "
        "hops, fused and ranked). Returns the top-k chunks, each with its score (the "
        "probability, 0-1, that it answers the question) and source.",
        _object(
            {
                "query": _QUERY,
                "k": _K,
                "hops": _HOPS,
                "min_score": _MIN_SCORE,
                "reference_time": _REFERENCE_TIME,
                **_RECALL_FILTERS,
            },
            ("query",),
        ),
        aliases=("knowmind_recall",),
    ),
    _read(
        "knowmind_recall_at_time",
        "Recall memories valid at a point in time",
        "Like knowmind_recall_memories, restricted to memories valid at as_of "
        "(valid_from <= as_of < valid_to); superseded facts answer for their own time.",
        _object(
            {
                "query": _QUERY,
                "as_of": {
                    "type": "string",
                    "format": "date-time",
                    "description": "ISO-8601 instant (default: now; UTC when no offset)",
                },
                "k": _K,
                "min_score": _MIN_SCORE,
                "reference_time": _REFERENCE_TIME,
                **_RECALL_FILTERS,
            },
            ("query",),
        ),
    ),
    _write(
        "knowmind_store_memory",
        "Store a memory",
        "Store a fact, event, procedure or reference (append-only; identical content is "
        "reported as unchanged). Optional relations link the memory to named entities; "
        "occurred_at, speaker and role say when it happened and who said it; user_id, "
        "agent_id and session_id scope it. Returns the memory id. Unknown keys are ignored.",
        _object(
            {
                "content": _schema(c.Content, "the memory text"),
                "title": _schema(c.Title),
                "memory_type": _MEMORY_TYPE,
                "tags": _schema(c.TagList, "tags"),
                "source": _schema(c.ShortText, "where it comes from"),
                "domain": _schema(c.ShortText, "subject area"),
                "relations": _RELATIONS,
                "occurred_at": _instant(
                    "when it happened or was said (ISO 8601; UTC when no offset; default: now)"
                ),
                "speaker": _schema(c.Speaker, "who said it (a name)"),
                "role": _schema(c.Role, "the speaker's role: user, assistant, …"),
                **_SCOPES,
            },
            ("content",),
            extra_keys=True,
        ),
    ),
    _write(
        "knowmind_remember_conversation",
        "Remember a conversation",
        "Store a conversation (a session) in one call: each message becomes a memory with its "
        "time, speaker and role, recallable on its own and matched with the messages before "
        "it (a short reply finds what it answers); each speaker becomes an entity. Send the "
        "whole session again with new messages appended: those stored already are reported "
        "unchanged. (Not knowmind_answer's conversation_id, which threads questions.)",
        _object(
            {
                "messages": _schema(
                    Annotated[list[Any], c.MessageCount], "the messages in order", items=_MESSAGE
                ),
                "session_id": _schema(
                    c.ScopeId, "the session (default: derived from the first message)"
                ),
                "user_id": _SCOPES["user_id"],
                "agent_id": _SCOPES["agent_id"],
                "occurred_at": _instant(
                    "when the messages without a time of their own were said (ISO 8601)"
                ),
                "offset": _schema(
                    c.TurnOffset,
                    "the position of the first message in the session (a later part)",
                    default=0,
                ),
            },
            ("messages",),
        ),
    ),
    _write(
        "knowmind_upload_document",
        "Upload a document",
        "Chunk, embed and index a document. The title is the upsert key: a document with the "
        "same title replaces the old version. Returns the document id and number of chunks.",
        _object(
            {
                "content": _schema(c.Content, "the document text"),
                "title": _schema(c.NonEmptyTitle, "document title (upsert key)"),
                "source": _schema(c.ShortText, "where it comes from"),
                "relations": _RELATIONS,
                "build_tree": {
                    "type": "boolean",
                    "default": False,
                    "description": "also build a RAPTOR summary tree (background job; needs a "
                    "language model) for method raptor of knowmind_answer",
                },
            },
            ("content",),
        ),
        destructive=True,
        tenant_wide=True,
    ),
    _write(
        "knowmind_update_fact",
        "Update a fact (bi-temporal)",
        "Supersede a memory: the old one stays in history (valid_to = now), a new memory "
        "valid from now replaces it, linked new -SUPERSEDES-> old with the reason.",
        _object(
            {
                "target_id": _uuid("id of the memory to supersede"),
                "new_title": _schema(c.NonEmptyTitle, "title of the new version"),
                "new_content": _schema(c.Content, "content of the new version"),
                "update_reason": _schema(c.Reason),
            },
            ("target_id", "new_title", "new_content"),
        ),
        idempotent=False,
    ),
    _write(
        "knowmind_upsert_entity",
        "Create or find an entity",
        "Create-or-return the node for a named thing; the same (name, entity_class) always "
        "returns the same id.",
        _object(
            {
                "name": _schema(c.Name, "the entity's name"),
                "entity_class": _schema(c.ClassName, "class from the catalogue, e.g. Person"),
                "description": _schema(c.Description),
                "aliases": _schema(c.Aliases, "other names"),
            },
            ("name", "entity_class"),
        ),
        aliases=("knowmind_entity",),
        tenant_wide=True,
    ),
    _write(
        "knowmind_link_entities",
        "Link two nodes",
        "Draw a typed edge between two nodes (memories or entities); the inverse edge is "
        "created too. Idempotent.",
        _object(
            {
                "from_id": _uuid(_NODE),
                "to_id": _uuid(_NODE),
                "rel_type": _schema(c.PredicateName, "relation type, e.g. WORKS_FOR"),
                "confidence": _confidence("0..1"),
            },
            ("from_id", "to_id", "rel_type"),
        ),
        aliases=("knowmind_link",),
        tenant_wide=True,
    ),
    _write(
        "knowmind_unlink_entities",
        "Unlink two nodes",
        "Remove a typed edge and its inverse; removing an edge that does not exist is a no-op.",
        _object(
            {
                "from_id": _uuid(_NODE),
                "to_id": _uuid(_NODE),
                "rel_type": _schema(c.PredicateName, "relation type"),
            },
            ("from_id", "to_id", "rel_type"),
        ),
        destructive=True,
        aliases=("knowmind_unlink",),
        tenant_wide=True,
    ),
    _read(
        "knowmind_list_relations",
        "List relations of a node",
        "All incoming and outgoing edges of one node with edge type and the connected node.",
        _object({"memory_id": _uuid(_NODE)}, ("memory_id",)),
    ),
    _read(
        "knowmind_list_recent",
        "List recent memories",
        "The newest memories and documents first (by created_at).",
        _object({"k": _int("number of entries", 1, 50, 10)}),
    ),
    _read(
        "knowmind_get_stats",
        "Statistics",
        "Counts for the tenant: memories, graph edges, vector chunks.",
        _object({}),
        aliases=("knowmind_stats",),
    ),
    _read(
        "knowmind_get_health",
        "Health",
        "Status per component (PostgreSQL, memory service, graph).",
        _object({}),
        aliases=("knowmind_health",),
    ),
    _read(
        "knowmind_get_schema",
        "Relation catalogue",
        "Every relation type with its subject and object classes and when to use it, and the "
        "entity classes.",
        _object({}),
        aliases=("knowmind_schema",),
    ),
    _read(
        "knowmind_answer",
        "Answer a question",
        "Answer from the tenant's memories with a retrieval method and the tenant's language "
        "model, citing the passages the answer names ([1], [2], …). Methods: "
        + ", ".join(METHOD_NAMES)
        + ". Says in degraded what could not run (no model, a step that failed).",
        _object(
            {
                "question": _QUERY,
                "k": _K,
                "method": {
                    "type": "string",
                    "maxLength": 40,
                    "pattern": method_pattern(),
                    "default": "standard",
                    "description": f"one of {', '.join(METHOD_NAMES)} (any case)",
                    "errorMessage": f"must be one of {', '.join(METHOD_NAMES)}",
                },
                "compress": {"type": "boolean", "default": False},
                "parent_context": {"type": "boolean", "default": False},
                "rerank": {"type": "boolean"},
                "llm_model": _schema(c.ModelName, "the language model (default: the tenant's)"),
                "max_tokens": _int("most tokens the answer may have", 16, 2048, 256),
                "conversation_id": _schema(c.ConversationId),
                "share_conversation": {"type": "boolean", "default": False},
            },
            ("question",),
        ),
    ),
)
