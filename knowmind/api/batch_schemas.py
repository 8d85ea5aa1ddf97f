"""Bulk ingest over REST (``POST /v1/memories/batch``) and ``knowmind import``. Items are
validated one by one (each against the single-memory schema), so one malformed item fails
alone, with its field named."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from msgspec import Meta, Struct

from knowmind.api.errors import field_of_message
from knowmind.api.schemas import MemoryIn
from knowmind.services.batch import ItemError
from knowmind.services.graph import InlineRelation
from knowmind.services.memories import MemoryDraft

__all__ = ["BatchIn", "BatchItemOut", "BatchOut", "ItemErrorOut", "draft_or_error"]

MAX_ITEMS = 100


class BatchIn(Struct):
    """Up to 100 memories, each shaped like the body of ``POST /v1/memories``."""

    items: Annotated[list[dict[str, Any]], Meta(min_length=1, max_length=MAX_ITEMS)]


class ItemErrorOut(Struct):
    field: str  # e.g. "content", "relations[0].predicate"; "" = the item as a whole
    message: str


class BatchItemOut(Struct):
    index: int
    status: Literal["created", "unchanged", "error"]
    id: UUID | None = None
    chunks: int = 0
    job_id: UUID | None = None
    error: ItemErrorOut | None = None


class BatchOut(Struct):
    created: int
    unchanged: int
    failed: int
    results: list[BatchItemOut]


def draft_or_error(item: Any) -> MemoryDraft | ItemError:
    """One item validated like a single ``POST /v1/memories`` body."""
    try:
        data = msgspec.convert(item, MemoryIn)
    except msgspec.ValidationError as exc:
        field, message = field_of_message(str(exc))
        return ItemError(field, message)
    if _has_nul(data.metadata):
        return ItemError("metadata", "must not contain NUL characters")
    return MemoryDraft(
        content=data.content,
        title=data.title,
        memory_type=data.memory_type,
        tags=tuple(data.tags),
        source=data.source,
        domain=data.domain,
        metadata=data.metadata,
        relations=tuple(InlineRelation(**msgspec.structs.asdict(r)) for r in data.relations),
    )


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False
