"""The PostgreSQL graph, the system of record: typed edges with materialised inverses and
server-derived edges, always written inside the caller's tenant transaction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.errors import NotFoundError
from knowmind.graph.ontology import MEMORY_CLASS, Ontology, Predicate
from knowmind.store import edges as edge_store

__all__ = ["Node", "link", "refresh_derived", "remove_node_edges", "resolve_nodes", "unlink"]


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


async def link(
    conn: AsyncConnection,
    tenant_id: UUID,
    ontology: Ontology,
    source: Node,
    target: Node,
    predicate: Predicate,
    confidence: float = 1.0,
    properties: dict[str, Any] | None = None,
) -> tuple[UUID, UUID | None]:
    """Draw ``source -predicate-> target`` and its inverse (or symmetric twin); idempotent.
    Returns (edge id, twin edge id)."""
    same_node = source.id == target.id
    ontology.check_link(predicate, source.graph_class, target.graph_class, same_node=same_node)
    await edge_store.lock_tenant_graph(conn, tenant_id)

    async def draw(start: Node, end: Node, name: str) -> UUID:
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
        )

    edge_id = await draw(source, target, predicate.name)
    twin_id = None
    if predicate.twin:
        twin_id = await draw(target, source, predicate.twin)
        await edge_store.set_inverse(conn, tenant_id, edge_id, twin_id)
    await refresh_derived(conn, tenant_id, ontology, [predicate.name, predicate.twin or ""])
    return edge_id, twin_id


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
