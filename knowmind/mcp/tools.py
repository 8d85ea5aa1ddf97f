"""The MCP tools: validated arguments mapped onto the same services the REST API calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from knowmind.api.outputs import (
    answer_result,
    client_recall_result,
    conversation_result,
    document_result,
    inline_relations,
    memory_preview,
    remembered,
)
from knowmind.mcp.catalogue import SPECS, ToolSpec
from knowmind.recall.base import RecallRequest
from knowmind.services.answer import AnswerRequest, AnswerService
from knowmind.services.auth import Principal
from knowmind.services.documents import DocumentDraft, DocumentService
from knowmind.services.graph import GraphService
from knowmind.services.health import HealthService
from knowmind.services.memories import MemoryDraft, MemoryFilters, MemoryService
from knowmind.services.recall import RecallService
from knowmind.services.turns import ConversationDraft, TurnDraft
from knowmind.services.turns import remember_conversation as remember_turns

__all__ = ["TOOLS", "Tool", "ToolServices", "listed_tools"]


@dataclass(frozen=True, slots=True)
class ToolServices:
    """The services the tools call (the app provides it from its own, by these names)."""

    memories: MemoryService
    recall: RecallService
    documents: DocumentService
    graph: GraphService
    health: HealthService
    answers: AnswerService


Args = dict[str, Any]
Handler = Callable[[ToolServices, Principal, Args], Awaitable[Any]]


@dataclass(frozen=True, slots=True)
class Tool:
    spec: ToolSpec
    run: Handler


def _filters(a: Args, as_of: datetime | None = None) -> MemoryFilters:
    """The recall tools' filters: a user, agent, session, an event-time window."""
    return MemoryFilters(
        as_of=as_of,
        user_id=a.get("user_id"),
        agent_id=a.get("agent_id"),
        session_id=a.get("session_id"),
        occurred_after=a.get("occurred_after"),
        occurred_before=a.get("occurred_before"),
    )


async def recall_memories(rt: ToolServices, who: Principal, a: Args) -> Args:
    request = RecallRequest(
        text=a["query"],
        k=a["k"],
        hops=a["hops"],
        min_score=a["min_score"],
        filters=_filters(a),
        reference_time=a.get("reference_time"),
    )
    outcome = await rt.recall.recall(who, request)
    return client_recall_result(outcome)


async def recall_at_time(rt: ToolServices, who: Principal, a: Args) -> Args:
    """Without ``as_of`` the filter is "valid now" by the database's clock."""
    as_of: datetime | None = a.get("as_of")
    request = RecallRequest(
        text=a["query"],
        k=a["k"],
        filters=_filters(a, as_of),
        min_score=a["min_score"],
        reference_time=a.get("reference_time"),
    )
    outcome = await rt.recall.recall(who, request)
    return {"as_of": as_of or datetime.now(UTC), **client_recall_result(outcome)}


async def store_memory(rt: ToolServices, who: Principal, a: Args) -> Args:
    draft = MemoryDraft(
        content=a["content"],
        title=a.get("title"),
        memory_type=a["memory_type"],
        tags=tuple(a.get("tags") or ()),
        source=a.get("source"),
        domain=a.get("domain"),
        relations=inline_relations(a.get("relations") or ()),
        occurred_at=a.get("occurred_at"),
        speaker=a.get("speaker"),
        role=a.get("role"),
        user_id=a.get("user_id"),
        agent_id=a.get("agent_id"),
        session_id=a.get("session_id"),
    )
    return remembered(await rt.memories.remember(who, draft))


async def remember_conversation(rt: ToolServices, who: Principal, a: Args) -> Args:
    conversation = ConversationDraft(
        messages=tuple(
            TurnDraft(
                content=m["content"],
                speaker=m.get("speaker"),
                role=m.get("role"),
                occurred_at=m.get("occurred_at"),
                id=m.get("id"),
            )
            for m in a["messages"]
        ),
        session_id=a.get("session_id"),
        user_id=a.get("user_id"),
        agent_id=a.get("agent_id"),
        occurred_at=a.get("occurred_at"),
        offset=a["offset"],
    )
    return conversation_result(await remember_turns(rt.memories, who, conversation))


async def upload_document(rt: ToolServices, who: Principal, a: Args) -> Args:
    draft = DocumentDraft(
        title=a.get("title"),
        content=a["content"],
        source=a.get("source"),
        relations=inline_relations(a.get("relations") or ()),
        build_tree=bool(a.get("build_tree")),
    )
    done = await rt.documents.upload(who, draft)
    return document_result(done)


async def update_fact(rt: ToolServices, who: Principal, a: Args) -> Args:
    done = await rt.memories.supersede(
        who, a["target_id"], a["new_title"], a["new_content"], a.get("update_reason")
    )
    return {**remembered(done), "supersedes": a["target_id"]}


async def upsert_entity(rt: ToolServices, who: Principal, a: Args) -> Args:
    row, created = await rt.graph.upsert_entity(
        who, a["name"], a["entity_class"], a.get("description"), a.get("aliases")
    )
    return {
        "id": row.id,
        "name": row.name,
        "entity_class": row.entity_class,
        "description": row.description,
        "aliases": row.aliases,
        "created": created,
    }


async def link_entities(rt: ToolServices, who: Principal, a: Args) -> Args:
    edge, twin = await rt.graph.link(who, a["from_id"], a["to_id"], a["rel_type"], a["confidence"])
    return {"edge_id": edge, "inverse_edge_id": twin}


async def unlink_entities(rt: ToolServices, who: Principal, a: Args) -> Args:
    removed = await rt.graph.unlink(who, a["from_id"], a["to_id"], a["rel_type"])
    return {"removed": removed}


async def list_relations(rt: ToolServices, who: Principal, a: Args) -> Args:
    rows = await rt.graph.relations(who, a["memory_id"])
    return {
        "node_id": a["memory_id"],
        "relations": [
            {
                "predicate": r["predicate"],
                "direction": r["direction"],
                "confidence": round(float(r["confidence"]), 4),
                "derived": r["derived"],
                "node": {
                    "id": r["node_id"],
                    "kind": r["kind"],
                    "title_or_name": r["title_or_name"],
                    "entity_class": r["entity_class"],
                },
            }
            for r in rows
        ],
    }


async def list_recent(rt: ToolServices, who: Principal, a: Args) -> Args:
    rows, _ = await rt.memories.list_recent(who, a["k"], None)
    return {"items": [memory_preview(r) for r in rows]}


async def get_stats(rt: ToolServices, who: Principal, a: Args) -> Args:
    return await rt.health.stats(who)


async def get_health(rt: ToolServices, who: Principal, a: Args) -> Args:
    return await rt.health.health_detail(who.tenant_id)


async def answer(rt: ToolServices, who: Principal, a: Args) -> Args:
    request = AnswerRequest(
        question=a["question"],
        k=a["k"],
        method=a["method"],
        rerank=a.get("rerank"),
        compress=a["compress"],
        parent_context=a["parent_context"],
        llm_model=a.get("llm_model"),
        max_tokens=a["max_tokens"],
        conversation_id=a.get("conversation_id"),
        share_conversation=a["share_conversation"],
    )
    return answer_result(await rt.answers.answer(who, request), {})


async def get_schema(rt: ToolServices, who: Principal, a: Args) -> Args:
    return await rt.graph.schema(who)


_HANDLERS: dict[str, Handler] = {
    "knowmind_recall_memories": recall_memories,
    "knowmind_recall_at_time": recall_at_time,
    "knowmind_store_memory": store_memory,
    "knowmind_remember_conversation": remember_conversation,
    "knowmind_upload_document": upload_document,
    "knowmind_update_fact": update_fact,
    "knowmind_upsert_entity": upsert_entity,
    "knowmind_link_entities": link_entities,
    "knowmind_unlink_entities": unlink_entities,
    "knowmind_list_relations": list_relations,
    "knowmind_list_recent": list_recent,
    "knowmind_get_stats": get_stats,
    "knowmind_get_health": get_health,
    "knowmind_get_schema": get_schema,
    "knowmind_answer": answer,
}

#: Every callable name, current and deprecated, to its tool.
TOOLS: dict[str, Tool] = {
    name: Tool(spec, _HANDLERS[spec.name]) for spec in SPECS for name in (spec.name, *spec.aliases)
}


def listed_tools() -> list[dict[str, Any]]:
    """The ``tools/list`` result: current names first, then the deprecated aliases."""
    current = [spec.describe() for spec in SPECS]
    aliases = [spec.describe(alias) for spec in SPECS for alias in spec.aliases]
    return current + aliases
