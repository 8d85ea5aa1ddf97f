"""Unit test: every limit the REST bodies enforce equals its twin in the MCP tool schemas.

Both doors take their limits from ``knowmind.contract.limits``; this test catches a field that
someone writes out by hand on one side again. It compares the JSON Schema msgspec derives from
each REST struct field with the MCP ``inputSchema`` of the same argument.
"""

from __future__ import annotations

from typing import Any, get_args

import msgspec
import pytest

from knowmind.api.answer_schemas import AnswerIn
from knowmind.api.document_schemas import DocumentIn
from knowmind.api.graph_schemas import EntityIn, LinkIn
from knowmind.api.schemas import MemoryIn, RecallFilters, RecallIn, SupersedeIn
from knowmind.api.turn_schemas import ConversationIn, MessageIn
from knowmind.contract import limits
from knowmind.contract.drafts import RelationIn
from knowmind.mcp.catalogue import SPECS
from knowmind.services.memories import MEMORY_TYPES

#: (tool, argument) -> (REST struct, field). Every MCP argument is listed here or in UNPAIRED.
TWINS: dict[tuple[str, str], tuple[type[msgspec.Struct], str]] = {
    ("knowmind_recall_memories", "query"): (RecallIn, "query"),
    ("knowmind_recall_memories", "k"): (RecallIn, "k"),
    ("knowmind_recall_memories", "hops"): (RecallIn, "hops"),
    ("knowmind_recall_at_time", "query"): (RecallIn, "query"),
    ("knowmind_recall_at_time", "k"): (RecallIn, "k"),
    ("knowmind_recall_memories", "min_score"): (RecallIn, "min_score"),
    ("knowmind_recall_at_time", "min_score"): (RecallIn, "min_score"),
    ("knowmind_recall_memories", "reference_time"): (RecallIn, "reference_time"),
    ("knowmind_recall_at_time", "reference_time"): (RecallIn, "reference_time"),
    **{
        ("knowmind_store_memory", name): (MemoryIn, name)
        for name in (
            *("content", "title", "memory_type", "tags", "source", "domain", "relations"),
            *("occurred_at", "speaker", "role", "user_id", "agent_id", "session_id"),
        )
    },
    **{
        (tool, name): (RecallFilters, name)
        for tool in ("knowmind_recall_memories", "knowmind_recall_at_time")
        for name in ("user_id", "agent_id", "session_id", "occurred_after", "occurred_before")
    },
    **{
        ("knowmind_upload_document", name): (DocumentIn, name)
        for name in ("content", "title", "source", "relations", "build_tree")
    },
    **{
        ("knowmind_update_fact", name): (SupersedeIn, name)
        for name in ("new_title", "new_content", "update_reason")
    },
    **{
        ("knowmind_upsert_entity", name): (EntityIn, name)
        for name in ("name", "entity_class", "description", "aliases")
    },
    **{
        ("knowmind_remember_conversation", name): (ConversationIn, name)
        for name in ("messages", "session_id", "user_id", "agent_id", "occurred_at", "offset")
    },
    ("knowmind_link_entities", "rel_type"): (LinkIn, "rel_type"),
    ("knowmind_link_entities", "confidence"): (LinkIn, "confidence"),
    ("knowmind_unlink_entities", "rel_type"): (LinkIn, "rel_type"),
    **{
        ("knowmind_answer", name): (AnswerIn, name)
        for name in (
            "question",
            "k",
            "method",
            "compress",
            "parent_context",
            "rerank",
            "llm_model",
            "max_tokens",
            "conversation_id",
            "share_conversation",
        )
    },
}
#: MCP arguments without a limited REST twin (ids, instants, MCP-only paging).
UNPAIRED = {
    ("knowmind_recall_at_time", "as_of"),
    ("knowmind_update_fact", "target_id"),
    ("knowmind_link_entities", "from_id"),
    ("knowmind_link_entities", "to_id"),
    ("knowmind_unlink_entities", "from_id"),
    ("knowmind_unlink_entities", "to_id"),
    ("knowmind_list_relations", "memory_id"),
    ("knowmind_list_recent", "k"),  # a preview list; REST pages with ?limit= and a cursor
}
#: Keywords that carry a limit (``description`` and the NUL pattern do not).
LIMIT_KEYS = ("type", "minLength", "maxLength", "pattern", "minimum", "maximum", "maxItems")


def _mcp_properties() -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (spec.name, name): schema
        for spec in SPECS
        for name, schema in spec.input_schema["properties"].items()
    }


def _rest_property(struct: type[msgspec.Struct], field: str) -> tuple[dict[str, Any], Any]:
    """The field's JSON Schema (``null`` branch of an optional dropped) and its default."""
    (_, components) = msgspec.json.schema_components([struct])
    schema = components[struct.__name__]["properties"][field]
    if "anyOf" in schema:
        schema = next(s for s in schema["anyOf"] if s.get("type") != "null")
    if "$ref" in schema:
        schema = components[schema["$ref"].rsplit("/", 1)[1]]
    info = next(f for f in msgspec.inspect.type_info(struct).fields if f.name == field)
    default = info.default if info.default is not msgspec.NODEFAULT else None
    return schema, default


def _limits(schema: dict[str, Any]) -> dict[str, Any]:
    found = {key: schema[key] for key in LIMIT_KEYS if key in schema}
    if found.get("pattern") == limits.NO_NUL:
        del found["pattern"]  # the MCP validator refuses NUL in every string
    if "enum" in schema:  # msgspec omits the type of a Literal; the values say it
        found.pop("type", None)
        found["enum"] = sorted(schema["enum"])
    if isinstance(schema.get("items"), dict):
        found["items"] = _limits(schema["items"])
    return found


def test_every_mcp_argument_is_paired_or_listed_as_unpaired():
    assert set(_mcp_properties()) == set(TWINS) | UNPAIRED


@pytest.mark.parametrize(("tool", "argument"), sorted(TWINS))
def test_rest_and_mcp_limits_agree(tool: str, argument: str):
    struct, field = TWINS[(tool, argument)]
    rest, rest_default = _rest_property(struct, field)
    mcp = _mcp_properties()[(tool, argument)]
    if mcp.get("type") == "object" or rest.get("type") == "object":
        pytest.fail("objects are compared field by field (relations below)")
    if "$ref" in rest.get("items", {}):  # compared field by field below
        struct_of_items = {"relations": "/RelationIn", "messages": "/MessageIn"}[argument]
        assert rest["items"]["$ref"].endswith(struct_of_items)
        assert mcp["maxItems"] == rest["maxItems"]
        assert mcp.get("minItems") == rest.get("minItems")
        return
    assert _limits(mcp) == _limits(rest), f"{tool}.{argument} drifted from {struct.__name__}"
    if rest_default is not None and not callable(rest_default):
        assert mcp.get("default") == rest_default


@pytest.mark.parametrize("tool", ["knowmind_store_memory", "knowmind_upload_document"])
def test_inline_relation_limits_agree(tool: str):
    mcp = _mcp_properties()[(tool, "relations")]["items"]
    rest_fields = [f.name for f in msgspec.inspect.type_info(RelationIn).fields]
    assert set(mcp["properties"]) == set(rest_fields)
    for field in rest_fields:
        rest, default = _rest_property(RelationIn, field)
        assert _limits(mcp["properties"][field]) == _limits(rest), f"relations.{field} drifted"
        if default is not None:
            assert mcp["properties"][field].get("default") == default
    required = [f.name for f in msgspec.inspect.type_info(RelationIn).fields if f.required]
    assert mcp["required"] == required


def test_conversation_message_limits_agree():
    mcp = _mcp_properties()[("knowmind_remember_conversation", "messages")]["items"]
    rest_fields = [f.name for f in msgspec.inspect.type_info(MessageIn).fields]
    assert set(mcp["properties"]) == set(rest_fields)
    for field in rest_fields:
        rest, _ = _rest_property(MessageIn, field)
        assert _limits(mcp["properties"][field]) == _limits(rest), f"messages.{field} drifted"
    required = [f.name for f in msgspec.inspect.type_info(MessageIn).fields if f.required]
    assert mcp["required"] == required


def test_memory_types_are_defined_once():
    assert get_args(limits.MemoryType) == limits.MEMORY_TYPES == MEMORY_TYPES


def test_query_limit_is_the_same_for_both_doors():
    """The drift that started this: MCP allowed 2000 characters, REST 4000."""
    recall = _mcp_properties()[("knowmind_recall_memories", "query")]
    assert recall["maxLength"] == limits.QUERY_MAX_CHARS == 4000
