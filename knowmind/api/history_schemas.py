"""Response body of ``GET /v1/memories/{id}/history``: the memory's supersessions (by hand:
``update_fact``; automatic: a single-valued fact it stated changed) and automatic fact updates."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec
from msgspec import Struct

from knowmind.services.facts import MemoryHistory

__all__ = ["MemoryHistoryOut", "history_out"]


class NamedNodeOut(Struct):
    id: UUID
    name: str | None  # None: the entity was erased since
    entity_class: str | None


class FactUpdateOut(Struct):
    """``subject -predicate->`` changed from ``old_object`` to ``new_object`` at ``changed_at``
    (valid time): the old edge closed, the new one holds."""

    predicate: str
    subject: NamedNodeOut
    old_object: NamedNodeOut
    new_object: NamedNodeOut
    old_edge_id: UUID
    new_edge_id: UUID
    changed_at: datetime
    decided_by: Literal["rule", "llm"]  # llm: the extractor's model proposed the new relation
    audit_id: int
    model: str | None = None
    proposal: dict[str, Any] | None = None  # the relation the model proposed (ids)


class HistoryEventOut(Struct):
    at: datetime
    event: Literal["superseded_by", "supersedes", "fact_closed", "fact_replaced"]
    memory_id: UUID | None  # the other memory
    automatic: bool
    reason: str | None
    actor: str | None  # who wrote the change (None: not recorded, as for update_fact)
    memory_closed: bool  # this event ended the memory's validity
    fact: FactUpdateOut | None = None


class MemoryHistoryOut(Struct):
    memory_id: UUID
    valid_from: datetime
    valid_to: datetime | None
    events: list[HistoryEventOut]


def history_out(history: MemoryHistory) -> MemoryHistoryOut:
    return msgspec.convert(history, MemoryHistoryOut, from_attributes=True)
