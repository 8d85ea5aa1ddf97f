"""Presentation at the edge: what the service results look like, one mapping per result kind,
used by the REST controllers (which wrap the dicts in their msgspec structs) and the MCP tools
(which send them as they are). Inputs the other way: ``inline_relations``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import msgspec

from knowmind.contract.drafts import RelationIn
from knowmind.contract.responses import MemoryOut
from knowmind.recall.pipeline import RecalledMemory, RecallOutcome
from knowmind.services.answer import AnswerResult
from knowmind.services.documents import DocumentResult
from knowmind.services.memories import MemoryRow, Remembered
from knowmind.services.turns import ConversationResult

__all__ = [
    "PREVIEW_CHARS",
    "conversation_result",
    "document_result",
    "inline_relations",
    "memory_fields",
    "memory_out",
    "memory_preview",
    "recall_hit",
    "recall_result",
    "remembered",
    "response",
]

R = TypeVar("R", bound=msgspec.Struct)

#: Content shown per memory in MCP listings (the full text is one REST call away).
PREVIEW_CHARS = 1000
_PREVIEW_KEYS = frozenset(
    {"id", "title", "memory_type", "tags", "source", "created_at"}
    | {"valid_from", "valid_to", "document_id", "chunks"}
    | {"occurred_at", "speaker", "role", "user_id", "agent_id", "session_id"}
)


def response(result: object, kind: type[R]) -> R:
    """The response record ``kind`` of a service's result: each field from the result's
    attribute of that name."""
    return msgspec.convert(result, kind, from_attributes=True)


def _pick(result: object, *names: str) -> dict[str, Any]:
    """The named attributes of ``result``, in that order."""
    return {name: getattr(result, name) for name in names}


_MEMORY_ATTRS = (
    *("id", "title", "content", "memory_type", "tags", "source", "domain", "metadata"),
    *("created_at", "valid_from", "valid_to", "document_id"),
)


_MEMORY_EVENT_ATTRS = ("occurred_at", "speaker")
_MEMORY_SCOPES = ("user_id", "agent_id", "session_id")


def memory_fields(row: MemoryRow) -> dict[str, Any]:
    """A memory as ``GET /v1/memories/{id}`` shows it (``role``: the speaker's)."""
    return {
        **_pick(row, *_MEMORY_ATTRS),
        "chunks": row.chunk_count,
        **_pick(row, *_MEMORY_EVENT_ATTRS),
        "role": row.speaker_role,
        **_pick(row, *_MEMORY_SCOPES),
    }


def memory_out(row: MemoryRow) -> MemoryOut:
    """A memory as the REST record: ``memory_fields``, typed."""
    return MemoryOut(**memory_fields(row))


def memory_preview(row: MemoryRow) -> dict[str, Any]:
    """A memory in a listing: content cut at ``PREVIEW_CHARS`` (``truncated`` says so)."""
    preview = {key: value for key, value in memory_fields(row).items() if key in _PREVIEW_KEYS}
    preview["content"] = row.content[:PREVIEW_CHARS]
    preview["truncated"] = len(row.content) > PREVIEW_CHARS
    return preview


_HIT_ATTRS = (
    "memory_id",
    "chunk_id",
    "title",
    "content",
    "source",
    "memory_type",
    "created_at",
    "kind",
    "occurred_at",
    "speaker",
)


def recall_hit(hit: RecalledMemory, *, with_stages: bool = True) -> dict[str, Any]:
    """One recall result; ``stages`` is each stage's rank of the memory (REST shows it)."""
    fields = _pick(hit.chunk, *_HIT_ATTRS)
    fields |= {
        "role": hit.chunk.speaker_role,
        "score": hit.score,
        "rerank_score": None if hit.rerank_score is None else round(hit.rerank_score, 6),
        "fused": hit.fused,
    }
    if with_stages:
        fields["stages"] = hit.stages
    if hit.features is not None:
        fields["explanation"] = {
            "ranker_score": round(hit.ranker_score, 6),
            "features": {k: None if v != v else round(v, 4) for k, v in hit.features.items()},
        }
    return fields


def recall_result(outcome: RecallOutcome, *, with_stages: bool = True) -> dict[str, Any]:
    """Results and whether (and why) the recall was degraded."""
    return {
        "results": [recall_hit(r, with_stages=with_stages) for r in outcome.results],
        "degraded": bool(outcome.degraded_reasons),
        "degraded_reasons": outcome.degraded_reasons,
    }


def client_recall_result(outcome: RecallOutcome) -> dict[str, Any]:
    """The MCP recall tools' answer: ours (``results``, ``degraded``) plus what knowmind's
    clients read: ``hits`` (``chunk_id``, ``content``, ``score``, ``metadata`` with
    ``source_id``, ``name``, ``title``) and ``latency_ms``."""
    hits = [
        {
            "chunk_id": hit.chunk.chunk_id,
            "content": hit.chunk.content,
            "score": hit.score,
            "metadata": {
                "source_id": hit.chunk.memory_id,
                "name": hit.chunk.title or hit.chunk.source or _excerpt(hit.chunk.content),
                "title": hit.chunk.title,
                "source": hit.chunk.source,
                "memory_type": hit.chunk.memory_type,
                **({"type": hit.chunk.kind} if hit.chunk.kind else {}),
                "occurred_at": hit.chunk.occurred_at,
                **({"speaker": hit.chunk.speaker} if hit.chunk.speaker else {}),
                **({"role": hit.chunk.speaker_role} if hit.chunk.speaker_role else {}),
            },
        }
        for hit in outcome.results
    ]
    latency = round(outcome.timings_ms.get("total", 0.0), 1)
    return {**recall_result(outcome, with_stages=False), "hits": hits, "latency_ms": latency}


def _excerpt(content: str, chars: int = 60) -> str:
    """A memory without title or source is named by its opening words."""
    words = " ".join(content.split())
    return words if len(words) <= chars else words[:chars].rsplit(" ", 1)[0] + " …"


def remembered(done: Remembered) -> dict[str, Any]:
    return _pick(done, "id", "status", "chunks", "job_id")


def document_result(done: DocumentResult) -> dict[str, Any]:
    return _pick(done, "id", "memory_id", "chunks", "status", "job_id", "tree_job_id", "tree_note")


def conversation_result(done: ConversationResult) -> dict[str, Any]:
    """A remembered conversation: per turn its status and memory, each speaker's entity."""
    return {
        **_pick(done, "session_id", "status", "created", "unchanged"),
        "turns": [
            _pick(t, "index", "turn", "status", "id", "chunks", "job_id") for t in done.turns
        ],
        "speakers": [_pick(s, "name", "entity_class", "id") for s in done.speakers],
    }


def inline_relations(items: Iterable[Mapping[str, Any]]) -> tuple[RelationIn, ...]:
    """The relations an MCP tool was given with a memory or document (its arguments are
    checked against the tool's schema; REST bodies decode into ``RelationIn`` themselves)."""
    fields = RelationIn.__struct_fields__
    return tuple(
        RelationIn(**{key: item[key] for key in fields if item.get(key) is not None})
        for item in items
    )


def answer_result(result: AnswerResult, metadata_filter: dict[str, Any]) -> dict[str, Any]:
    """An answer as both doors show it; passages numbered as the answer cites them."""
    return {
        "answer": result.answer,
        "supported": result.supported,
        "citations": [
            {
                "marker": c.marker,
                "memory_id": c.passage.memory_id,
                "chunk_id": c.passage.chunk_id,
                "title": c.passage.title,
            }
            for c in result.citations
        ],
        "passages": [
            {
                "marker": n,
                "memory_id": p.memory_id,
                "chunk_id": p.chunk_id,
                "title": p.title,
                "content": p.content,
                "score": p.score,
                "stages": list(p.stages),
                "summary_level": p.summary_level,
            }
            for n, p in enumerate(result.passages, start=1)
        ],
        "method": result.method,
        "method_details": {
            **result.details,
            **(
                {"standalone_question": result.standalone_question}
                if result.conversation_id
                else {}
            ),
            "degraded": result.degraded,
            "metadata_filter": metadata_filter,
        },
        "degraded": bool(result.degraded),
        "degraded_reasons": result.degraded,
        "timings_ms": result.timings_ms,
        "tokens": result.tokens,
        "model": result.model,
        "conversation_id": result.conversation_id,
    }
