"""Bulk ingest over REST (``POST /v1/memories/batch``) and ``knowmind import``. Items are
validated one by one (each against the single-memory schema), so one malformed item fails
alone, with its field named."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from msgspec import Meta, Struct

from knowmind.api.errors import field_of_message
from knowmind.api.schemas import MemoryIn, memory_draft
from knowmind.api.strict_body import StrictBody
from knowmind.errors import InvalidInputError
from knowmind.services.batch import ItemError
from knowmind.services.memories import MemoryDraft

__all__ = ["BatchIn", "BatchItemOut", "BatchOut", "ItemErrorOut", "draft_or_error"]

MAX_ITEMS = 100


class BatchIn(StrictBody):
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
        return memory_draft(msgspec.convert(item, MemoryIn))
    except msgspec.ValidationError as exc:
        field, message = field_of_message(str(exc))
        return ItemError(field, message)
    except InvalidInputError as exc:
        return ItemError(exc.field, exc.message)
