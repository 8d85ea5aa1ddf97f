"""The PostgreSQL graph, the system of record: typed edges with materialised inverses and
server-derived edges, always written inside the caller's tenant transaction.

A single-valued predicate (``Predicate.single_valued``) holds at most one current object per
subject entity: drawing ``s -P-> b`` while ``s -P-> a`` holds closes the older of the two (and its
twin) at the instant the newer one begins (bi-temporal: ``valid_to`` set, the row stays for
``as_of`` reads), as Graphiti invalidates a contradicted edge. Drawing the same object again
changes nothing. What was closed is returned as ``FactChange``s for the caller to act on (the
stating memories, the audit log: ``knowmind.services.facts``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.errors import NotFoundError
from knowmind.graph.ontology import MEMORY_CLASS, Ontology, Predicate
from knowmind.store import edges as edge_store
from knowmind.store import facts as fact_store
from knowmind.store.facts import CurrentFact

__all__ = [
    "Drawn",
    "FactChange",
    "Node",
    "draw",
    "draw_supersedes",
    "refresh_derived",
    "remove_node_edges",
    "resolve_nodes",
    "unlink",
]


@dataclass(frozen=True, slots=True)
class Node:
    id: UUID
    kind: str  # "memory" | "entity"
    entity_class: str | None

    @property
    def graph_class(self) -> str | None:
        return MEMORY_CLASS if self.kind == "memory" else self.entity_class


async def resolve_nodes(conn: AsyncConnection, tenant_id: UUID, **ids: UUID) -> dict[str, Node]:
    """Look nodes up by id; a missing (or other tenant's) id is a 404 naming the field."""
    kinds = await edge_store.node_kinds(conn, tenant_id, list(ids.values()))
    nodes = {}
    for field, node_id in ids.items():
        if node_id not in kinds:
            raise NotFoundError(f"{field}: no memory or entity {node_id}")
        kind, entity_class = kinds[node_id]
        nodes[field] = Node(node_id, kind, entity_class)
    return nodes


@dataclass(frozen=True, slots=True)
class FactChange:
    """``subject -predicate-> older.object_id`` was closed at ``at``: ``newer`` (another object)
    holds from then on."""

    predicate: str
    subject_id: UUID
    older: CurrentFact
    newer: CurrentFact
    at: datetime


@dataclass(frozen=True, slots=True)
class Drawn:
    edge_id: UUID
    twin_id: UUID | None
    changes: tuple[FactChange, ...] = ()  # single-valued facts this edge (or its twin) closed


async def draw(
    conn: AsyncConnection,
    tenant_id: UUID,
    ontology: Ontology,
    source: Node,
    target: Node,
    predicate: Predicate,
    confidence: float = 1.0,
    properties: dict[str, Any] | None = None,
    valid_from: datetime | None = None,
) -> Drawn:
    """Draw ``source -predicate-> target`` and its inverse (or symmetric twin); idempotent.
    Returns the edge ids and the single-valued facts it closed. ``valid_from``: since when the fact
    holds (its stating memory's ``valid_from``; now if None): of two objects the one that began
    later is current, whichever was drawn first."""
    same_node = source.id == target.id
    ontology.check_link(predicate, source.graph_class, target.graph_class, same_node=same_node)
    await edge_store.lock_tenant_graph(conn, tenant_id)

    async def one(start: Node, end: Node, name: str) -> UUID:
        return await edge_store.insert_edge(
            conn,
            tenant_id,
            from_id=start.id,
            from_kind=start.kind,
            to_id=end.id,
            to_kind=end.kind,
            predicate=name,
            confidence=confidence,
            properties=properties,
            valid_from=valid_from,
        )

    edge_id = await one(source, target, predicate.name)
    twin_id = None
    if predicate.twin:
        twin_id = await one(target, source, predicate.twin)
        await edge_store.set_inverse(conn, tenant_id, edge_id, twin_id)
    changes: list[FactChange] = []
    for drawn_id, subject, name in (
        (edge_id, source, predicate.name),
        (twin_id, target, predicate.twin),
    ):
        forward = ontology.predicates.get(name or "")
        if drawn_id and forward and forward.single_valued and subject.kind == "entity":
            changes += await _settle(conn, tenant_id, subject.id, forward.name, drawn_id)
    await refresh_derived(conn, tenant_id, ontology, [predicate.name, predicate.twin or ""])
    return Drawn(edge_id, twin_id, tuple(changes))


async def draw_supersedes(
    conn: AsyncConnection,
    tenant_id: UUID,
    ontology: Ontology,
    new_memory: UUID,
    old_memory: UUID,
    properties: dict[str, Any] | None,
) -> None:
    """Draw ``new_memory -SUPERSEDES-> old_memory`` (a new version, or a fact update)."""
    new, old = Node(new_memory, "memory", None), Node(old_memory, "memory", None)
    supersedes = ontology.predicate("SUPERSEDES")
    await draw(conn, tenant_id, ontology, new, old, supersedes, properties=properties)


async def _settle(
    conn: AsyncConnection, tenant_id: UUID, subject_id: UUID, predicate: str, drawn_id: UUID
) -> list[FactChange]:
    """One current object of a single-valued predicate: each older fact of the subject closes
    where the next one begins (a tie: the edge just drawn is the newer). The twins of the
    closed edges are closed with them; derived edges are refreshed by the caller."""
    facts = await fact_store.current_facts(conn, tenant_id, subject_id, predicate)
    if len(facts) < 2:
        return []
    facts.sort(key=lambda f: (f.valid_from, f.id == drawn_id))
    changes = []
    for older, newer in pairwise(facts):
        await fact_store.close_edge(conn, tenant_id, older, newer.valid_from)
        changes.append(FactChange(predicate, subject_id, older, newer, newer.valid_from))
    return changes


async def unlink(
    conn: AsyncConnection,
    tenant_id: UUID,
    ontology: Ontology,
    from_id: UUID,
    to_id: UUID,
    predicate: Predicate,
) -> int:
    """Remove the edge and its twin; removing what is not there is a no-op (returns 0)."""
    await edge_store.lock_tenant_graph(conn, tenant_id)
    removed = await edge_store.delete_edge_pair(
        conn, tenant_id, from_id, predicate.name, to_id, predicate.twin
    )
    if removed:
        await refresh_derived(conn, tenant_id, ontology, [predicate.name, predicate.twin or ""])
    return removed


async def remove_node_edges(
    conn: AsyncConnection, tenant_id: UUID, ontology: Ontology, node_id: UUID
) -> None:
    """Before a node is deleted: its edges go, and derived edges built on them follow."""
    await edge_store.lock_tenant_graph(conn, tenant_id)
    removed = await edge_store.delete_node_edges(conn, tenant_id, node_id)
    await refresh_derived(conn, tenant_id, ontology, removed)


async def refresh_derived(
    conn: AsyncConnection, tenant_id: UUID, ontology: Ontology, changed: Iterable[str]
) -> None:
    """Recompute the derived predicates whose inputs include a changed predicate (derived
    predicates may feed others, so repeat until nothing new is affected)."""
    pending = set(changed)
    done: set[str] = set()
    while pending:
        rules = [r for r in ontology.rules_using(pending) if r.predicate not in done]
        pending = set()
        for rule in rules:
            await edge_store.recompute_derived(conn, tenant_id, rule.predicate, rule.paths)
            done.add(rule.predicate)
            pending.add(rule.predicate)
