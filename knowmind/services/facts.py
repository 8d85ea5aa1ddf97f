"""Facts that update themselves: what follows when a single-valued fact is replaced
(``knowmind.graph.postgres`` closes the old edge), and a memory's history.

For each closed fact (``FactChange``):

- the memory that stated the old fact (``properties.source_memory_id``) is marked superseded by
  the memory that states the new one: ``new -SUPERSEDES-> old`` with the reason
  ``automatic: <predicate> changed from X to Y``;
- when that old memory states no current fact any more, its validity ends where the new fact
  begins (``valid_to``; as ``update_fact`` does), so recall finds the new memory now and the old
  one ``as_of`` before the change. A memory that still states another current fact stays valid,
  only marked; a document's memory is never closed (its text holds more than its facts); a fact
  linked by hand (no stating memory) closes no memory;
- an audit entry ``fact.superseded`` records it: ids only (edges, objects, memories), the
  predicate, the instant, and who decided (``rule``: a relation given with a memory or linked
  by hand; ``llm``: the extractor's proposal, with the model and the proposed relation). Names
  stay out of the audit log, which is never erased; ``GET /v1/memories/{id}/history`` shows
  them while the entities exist.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.graph import postgres as graph
from knowmind.graph.ontology import Ontology
from knowmind.services.audit import actor_of, record
from knowmind.services.auth import Principal
from knowmind.store import edges as edge_store
from knowmind.store import facts as fact_store

__all__ = [
    "FACT_ACTION",
    "Decision",
    "FactUpdate",
    "HistoryEvent",
    "MemoryHistory",
    "NamedNode",
    "apply_changes",
    "memory_history",
]

FACT_ACTION = "fact.superseded"


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """Who decided that the new relation holds: ``rule`` (given with a memory, or linked by
    hand) or ``llm`` (the extractor's proposal: the model, and the relation as proposed)."""

    by: str = "rule"
    model: str | None = None
    confidence: float | None = None

    def actor(self, who: Principal | None) -> str:
        if self.by == "llm":
            return "extractor:llm"
        return actor_of(who) if who is not None else "system"


async def apply_changes(
    conn: AsyncConnection,
    tenant: UUID,
    ontology: Ontology,
    changes: Sequence[graph.FactChange],
    who: Principal | None,
    decision: Decision,
) -> None:
    """The consequences of closed single-valued facts, in the caller's transaction."""
    for change in changes:
        await _apply(conn, tenant, ontology, change, who, decision)


async def _apply(
    conn: AsyncConnection,
    tenant: UUID,
    ontology: Ontology,
    change: graph.FactChange,
    who: Principal | None,
    decision: Decision,
) -> None:
    older, newer = change.older, change.newer
    old_memory, new_memory = older.memory_id, newer.memory_id
    # provenance may name a memory deleted since (its entity edges stay): never link to it
    alive = await edge_store.node_kinds(conn, tenant, [m for m in (old_memory, new_memory) if m])
    old_memory = old_memory if old_memory in alive else None
    new_memory = new_memory if new_memory in alive else None
    superseded = closed = False
    if old_memory and new_memory and old_memory != new_memory:
        names = await fact_store.entity_names(conn, tenant, [older.object_id, newer.object_id])
        old_name = names.get(older.object_id, (str(older.object_id), ""))[0]
        new_name = names.get(newer.object_id, (str(newer.object_id), ""))[0]
        reason = f"automatic: {change.predicate} changed from {old_name} to {new_name}"
        properties = {"reason": reason, "automatic": True}
        await graph.draw_supersedes(conn, tenant, ontology, new_memory, old_memory, properties)
        superseded = True
        if not await fact_store.states_current_fact(conn, tenant, old_memory):
            closed = await fact_store.close_memory(conn, tenant, old_memory, change.at)
    detail: dict[str, Any] = {
        "predicate": change.predicate,
        "subject_id": str(change.subject_id),
        "old_edge_id": str(older.id),
        "new_edge_id": str(newer.id),
        "old_object_id": str(older.object_id),
        "new_object_id": str(newer.object_id),
        "old_memory_id": str(old_memory) if old_memory else None,
        "new_memory_id": str(new_memory) if new_memory else None,
        "changed_at": change.at.isoformat(),
        "memory_superseded": superseded,
        "old_memory_closed": closed,
        "decided_by": decision.by,
    }
    if decision.by == "llm":
        # the model's decision: the relation it proposed (as ids) and how sure it was
        detail["model"] = decision.model
        detail["proposal"] = {
            "subject_id": str(change.subject_id),
            "predicate": change.predicate,
            "object_id": str(newer.object_id),
            "confidence": decision.confidence,
        }
    targets = [m for m in (old_memory, new_memory) if m] + [older.id, newer.id]
    await record(conn, who, FACT_ACTION, tenant, targets, detail, actor=decision.actor(who))


# -- a memory's history --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class NamedNode:
    id: UUID
    name: str | None  # None: erased since
    entity_class: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FactUpdate:
    """An automatic update: ``subject -predicate->`` changed from ``old_object`` to
    ``new_object`` at ``changed_at``."""

    predicate: str
    subject: NamedNode
    old_object: NamedNode
    new_object: NamedNode
    old_edge_id: UUID
    new_edge_id: UUID
    changed_at: datetime
    decided_by: str  # "rule" | "llm"
    model: str | None = None
    proposal: dict[str, Any] | None = None
    audit_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryEvent:
    """``superseded_by``: another memory replaced this one (``memory_id``); ``supersedes``: this
    one replaced another; ``fact_closed``: a fact this memory stated was replaced, no memory
    stating the new one (linked by hand); ``fact_replaced``: this memory's fact replaced one
    no memory stated."""

    at: datetime
    event: str
    memory_id: UUID | None
    automatic: bool
    reason: str | None
    actor: str | None  # None: not recorded (update_fact)
    memory_closed: bool = False  # the update ended this memory's validity
    fact: FactUpdate | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryHistory:
    memory_id: UUID
    valid_from: datetime
    valid_to: datetime | None
    events: list[HistoryEvent] = field(default_factory=list)


async def memory_history(
    conn: AsyncConnection, tenant: UUID, memory_id: UUID, valid: tuple[datetime, datetime | None]
) -> MemoryHistory:
    """Supersessions (by hand: ``update_fact``; automatic: a single-valued fact changed) and
    automatic fact updates of the memory, oldest first."""
    entries = await fact_store.fact_audit_entries(conn, tenant, memory_id, FACT_ACTION)
    edges = await fact_store.supersedes_edges(conn, tenant, memory_id)
    ids = {
        UUID(entry["detail"][k])
        for entry in entries
        for k in ("subject_id", "old_object_id", "new_object_id")
    }
    names = await fact_store.entity_names(conn, tenant, sorted(ids))
    events = [_fact_event(memory_id, entry, names) for entry in entries]
    for edge in edges:
        if edge["properties"].get("automatic"):
            continue  # told by its audit entries
        mine = edge["old_id"] == memory_id
        events.append(
            HistoryEvent(
                at=edge["created_at"],
                event="superseded_by" if mine else "supersedes",
                memory_id=edge["new_id"] if mine else edge["old_id"],
                automatic=False,
                reason=edge["properties"].get("reason"),
                actor=None,
                memory_closed=mine,
            )
        )
    events.sort(key=lambda e: e.at)
    return MemoryHistory(memory_id=memory_id, valid_from=valid[0], valid_to=valid[1], events=events)


def _fact_event(
    memory_id: UUID,
    entry: dict[str, Any],
    names: dict[UUID, tuple[str, str]],
) -> HistoryEvent:
    d = entry["detail"]

    def node(key: str) -> NamedNode:
        node_id = UUID(d[key])
        name, entity_class = names.get(node_id, (None, None))
        return NamedNode(node_id, name, entity_class)

    old_memory = UUID(d["old_memory_id"]) if d.get("old_memory_id") else None
    new_memory = UUID(d["new_memory_id"]) if d.get("new_memory_id") else None
    mine_old = old_memory == memory_id
    other = new_memory if mine_old else old_memory
    if other is not None and other != memory_id:
        event = "superseded_by" if mine_old else "supersedes"
    else:
        event = "fact_closed" if mine_old else "fact_replaced"
        other = None
    fact = FactUpdate(
        predicate=d["predicate"],
        subject=node("subject_id"),
        old_object=node("old_object_id"),
        new_object=node("new_object_id"),
        old_edge_id=UUID(d["old_edge_id"]),
        new_edge_id=UUID(d["new_edge_id"]),
        changed_at=datetime.fromisoformat(d["changed_at"]),
        decided_by=d.get("decided_by", "rule"),
        model=d.get("model"),
        proposal=d.get("proposal"),
        audit_id=int(entry["id"]),
    )
    old_name = fact.old_object.name or str(fact.old_object.id)
    new_name = fact.new_object.name or str(fact.new_object.id)
    return HistoryEvent(
        at=entry["at"],
        event=event,
        memory_id=other,
        automatic=True,
        reason=f"automatic: {fact.predicate} changed from {old_name} to {new_name}",
        actor=entry["actor"],
        memory_closed=mine_old and bool(d.get("old_memory_closed")),
        fact=fact,
    )
