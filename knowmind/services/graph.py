"""Entities, relations and the tenant's relation catalogue."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.contract.drafts import PredicateIn, RelationIn
from knowmind.db.engine import Database
from knowmind.errors import ConflictError, InvalidInputError, NotFoundError
from knowmind.graph import postgres as graph
from knowmind.graph.ontology import MEMORY_CLASS, Ontology, Predicate
from knowmind.linking.names import normalise_name
from knowmind.services import facts
from knowmind.services.auth import Principal, tenant_of
from knowmind.services.facts import Decision, MemoryHistory
from knowmind.services.lookup import memory_or_404
from knowmind.store import edges as edge_store
from knowmind.store import entities as entity_store
from knowmind.store import facts as fact_store
from knowmind.store import ontology as ontology_store
from knowmind.store.entities import EntityRow, NewEntity

__all__ = ["EntityRow", "GraphService"]


class GraphService:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -- catalogue -------------------------------------------------------------------------

    @staticmethod
    async def ontology(conn: AsyncConnection, tenant_id: UUID) -> Ontology:
        classes, predicates = await ontology_store.load_extensions(conn, tenant_id)
        if not classes and not predicates:
            return Ontology.default()
        return Ontology.default().extended(classes, predicates)

    async def schema(self, who: Principal) -> dict[str, Any]:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            return (await self.ontology(conn, tenant)).as_catalogue()

    async def extend_schema(self, who: Principal, draft: PredicateIn) -> Predicate:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            ontology = await self.ontology(conn, tenant)
            for name in (draft.name, draft.inverse):
                if name and name in ontology.predicates:
                    raise ConflictError(f"predicate {name} exists already")
            known = ontology.classes | set(draft.new_classes)
            for side in ("subject_classes", "object_classes"):
                unknown = ontology.expand(getattr(draft, side)) - known
                if unknown:
                    raise InvalidInputError(
                        side, f"unknown classes {sorted(unknown)}; declare them in new_classes"
                    )
            await ontology_store.insert_classes(conn, tenant, draft.new_classes)
            await ontology_store.insert_predicate(
                conn,
                tenant,
                name=draft.name,
                subject_classes=sorted(ontology.expand(draft.subject_classes)),
                object_classes=sorted(ontology.expand(draft.object_classes)),
                inverse=None if draft.symmetric else draft.inverse,
                symmetric=draft.symmetric,
                description=draft.description,
                single_valued=draft.single_valued,
            )
            return (await self.ontology(conn, tenant)).predicate(draft.name)

    # -- entities --------------------------------------------------------------------------

    async def upsert_entity(
        self,
        who: Principal,
        name: str,
        entity_class: str,
        description: str | None = None,
        aliases: list[str] | None = None,
    ) -> tuple[EntityRow, bool]:
        tenant = tenant_of(who)
        norm = _norm_or_422(name, "name")
        clean_aliases = sorted({a.strip() for a in aliases or [] if a.strip()})
        async with self.db.tenant_tx(tenant) as conn:
            (await self.ontology(conn, tenant)).check_class(entity_class)
            return await entity_store.upsert_entity(
                conn,
                tenant,
                NewEntity(
                    name=name.strip(),
                    norm_name=norm,
                    entity_class=entity_class,
                    description=description,
                    aliases=tuple(clean_aliases),
                    alias_norms=tuple(normalise_name(a) for a in clean_aliases),
                ),
            )

    async def get_entity(self, who: Principal, entity_id: UUID) -> EntityRow:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            row = await entity_store.get_entity(conn, tenant, entity_id)
        if row is None:
            raise NotFoundError(f"entity {entity_id} not found")
        return row

    async def search_entities(
        self, who: Principal, query: str, limit: int = 10, entity_class: str | None = None
    ) -> list[EntityRow]:
        tenant = tenant_of(who)
        norm = normalise_name(query)
        if not norm:  # nothing a name could match
            return []
        async with self.db.tenant_tx(tenant) as conn:
            return await entity_store.search_entities(conn, tenant, norm, limit, entity_class)

    # -- relations -------------------------------------------------------------------------

    async def link(
        self, who: Principal, from_id: UUID, to_id: UUID, rel_type: str, confidence: float = 1.0
    ) -> tuple[UUID, UUID | None]:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            ontology = await self.ontology(conn, tenant)
            predicate = ontology.settable(rel_type)
            nodes = await graph.resolve_nodes(conn, tenant, from_id=from_id, to_id=to_id)
            drawn = await graph.draw(
                conn, tenant, ontology, nodes["from_id"], nodes["to_id"], predicate, confidence
            )
            await facts.apply_changes(conn, tenant, ontology, drawn.changes, who, Decision())
            return drawn.edge_id, drawn.twin_id

    async def unlink(self, who: Principal, from_id: UUID, to_id: UUID, rel_type: str) -> int:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            ontology = await self.ontology(conn, tenant)
            predicate = ontology.settable(rel_type)
            return await graph.unlink(conn, tenant, ontology, from_id, to_id, predicate)

    async def relations(
        self, who: Principal, node_id: UUID, *, closed: bool = False
    ) -> list[dict[str, Any]]:
        """The node's current relations; with ``closed`` also those that no longer hold."""
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            await graph.resolve_nodes(conn, tenant, node_id=node_id)
            return await edge_store.node_relations(conn, tenant, node_id, closed=closed)

    async def memory_history(self, who: Principal, memory_id: UUID) -> MemoryHistory:
        """The memory's supersessions and automatic fact updates (``services.facts``)."""
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            row = await memory_or_404(conn, tenant, memory_id)
            valid = (row.valid_from, row.valid_to)
            return await facts.memory_history(conn, tenant, memory_id, valid)

    async def link_supersedes(
        self,
        conn: AsyncConnection,
        tenant: UUID,
        new_id: UUID,
        old_id: UUID,
        reason: str | None,
    ) -> None:
        ontology = await self.ontology(conn, tenant)
        properties = {"reason": reason} if reason else None
        await graph.draw_supersedes(conn, tenant, ontology, new_id, old_id, properties)

    # -- inline relations of a memory (inside the memory's transaction) --------------------

    async def check_inline_relations(
        self, conn: AsyncConnection, tenant: UUID, relations: Sequence[RelationIn]
    ) -> None:
        """Raise the 422 that writing these relations would raise, writing nothing: every
        write of a memory checks its relations, also one whose content is stored already."""
        if relations:
            await _plan(conn, tenant, await self.ontology(conn, tenant), relations, "inline")

    async def attach_inline_relations(
        self,
        conn: AsyncConnection,
        tenant: UUID,
        memory_id: UUID,
        relations: Sequence[RelationIn],
        method: str = "inline",
        *,
        who: Principal | None = None,
        model: str | None = None,
    ) -> None:
        """Draw the relations (entities found or created); ``method``: how they were found
        (``inline``: given with the memory, ``llm``: the LLM extractor, ``model``), kept on the
        mentions. All of them are checked before the first is drawn. A single-valued fact
        they replace is closed, and its memory superseded (``services.facts``; ``who`` wrote
        the memory)."""
        ontology = await self.ontology(conn, tenant)
        memory = graph.Node(memory_id, "memory", None)
        # the facts hold since the memory does (an extraction may run long after it was stored)
        since = await fact_store.memory_valid_from(conn, tenant, memory_id)
        mentions = []
        for planned in await _plan(conn, tenant, ontology, relations, method):
            confidence = planned.relation.confidence
            source = memory
            if planned.subject is not None:
                source = await _stored(conn, tenant, planned.subject)
                mentions.append((memory_id, None, source.id, method, confidence, None, None))
            target = await _stored(conn, tenant, planned.object)
            # provenance: erasing the memory erases the edges its relations drew
            provenance = {"source_memory_id": str(memory_id)}
            drawn = await graph.draw(
                conn,
                tenant,
                ontology,
                source,
                target,
                planned.predicate,
                confidence,
                provenance,
                valid_from=since,
            )
            mentions.append((memory_id, None, target.id, method, confidence, None, None))
            if drawn.changes:
                decision = Decision(
                    by="llm" if method == "llm" else "rule", model=model, confidence=confidence
                )
                await facts.apply_changes(conn, tenant, ontology, drawn.changes, who, decision)
        await edge_store.insert_mentions(conn, tenant, mentions)


# One end of an inline relation: a stored node, or an entity that writing it creates.
_End = graph.Node | NewEntity


@dataclass(frozen=True, slots=True)
class _Planned:
    relation: RelationIn
    predicate: Predicate
    subject: _End | None  # None: the memory itself
    object: _End


async def _plan(
    conn: AsyncConnection,
    tenant: UUID,
    ontology: Ontology,
    relations: Sequence[RelationIn],
    origin: str,
) -> list[_Planned]:
    """Check every relation and resolve its names, reading only: a 422 naming the field of
    the first relation that cannot be written."""
    names = _Names(conn, tenant, ontology, origin)
    plans = []
    for i, relation in enumerate(relations):
        prefix = f"relations[{i}]"
        predicate = ontology.settable(relation.predicate, f"{prefix}.predicate")
        object_ = await names.resolve(
            predicate,
            "object",
            relation.object,
            relation.object_class,
            prefix,
            relation.object_description,
        )
        subject = None
        if relation.subject:
            subject = await names.resolve(
                predicate, "subject", relation.subject, relation.subject_class, prefix
            )
        ontology.check_classes(
            predicate,
            _class_of(subject),
            _class_of(object_),
            (f"{prefix}.subject_class", f"{prefix}.object_class"),
        )
        ontology.check_distinct(predicate, subject == object_, f"{prefix}.object")
        plans.append(_Planned(relation, predicate, subject, object_))
    return plans


class _Names:
    """Resolves the names of inline relations to entities: a stored one, or a new one that
    later relations of the same write find as well (no twins of one name and class)."""

    def __init__(
        self, conn: AsyncConnection, tenant: UUID, ontology: Ontology, origin: str
    ) -> None:
        self.conn, self.tenant, self.ontology, self.origin = conn, tenant, ontology, origin
        self.new: dict[str, list[NewEntity]] = {}

    async def resolve(
        self,
        predicate: Predicate,
        side: str,  # "subject" | "object"
        name: str,
        entity_class: str | None,
        prefix: str,
        description: str | None = None,
    ) -> _End:
        """A name without a class is the entity of that name whose class the predicate
        allows; a stored entity of a class it does not allow is a 422, never a twin."""
        field = f"{prefix}.{side}"
        norm = _norm_or_422(name, field)
        if entity_class is not None:
            self.ontology.check_class(entity_class, f"{field}_class")
        known = await self._known(norm)
        if entity_class is not None:
            same = [end for end in known if _class_of(end) == entity_class]
            return same[0] if same else self._create(name, norm, entity_class, description)
        fitting = predicate.subject_classes if side == "subject" else predicate.object_classes
        matches = [end for end in known if _class_of(end) in fitting]
        if len(matches) == 1:
            return matches[0]
        allowed = " | ".join(sorted(fitting))
        if known and not matches:
            found = ", ".join(sorted({str(_class_of(end)) for end in known}))
            raise InvalidInputError(
                field,
                f"{name!r} exists as {found}; the {side} of {predicate.name} must be "
                f"of class {allowed}",
            )
        if matches or len(fitting) != 1:
            raise InvalidInputError(field, f"{name!r}: give its class, one of {allowed}")
        return self._create(name, norm, next(iter(fitting)), description)

    async def _known(self, norm: str) -> list[_End]:
        stored = await entity_store.find_entities_by_norm(self.conn, self.tenant, norm)
        nodes: list[_End] = [graph.Node(e.id, "entity", e.entity_class) for e in stored]
        return nodes + self.new.get(norm, [])

    def _create(
        self, name: str, norm: str, entity_class: str, description: str | None
    ) -> NewEntity:
        new = NewEntity(
            name=name.strip(),
            norm_name=norm,
            entity_class=entity_class,
            description=description,
            origin=self.origin,
        )
        self.new.setdefault(norm, []).append(new)
        return new


def _class_of(end: _End | None) -> str | None:
    """The graph class of a relation's end (``None``: the memory)."""
    if end is None:
        return MEMORY_CLASS
    return end.graph_class if isinstance(end, graph.Node) else end.entity_class


async def _stored(conn: AsyncConnection, tenant: UUID, end: _End) -> graph.Node:
    """The node of a planned end, the entity created if it is new."""
    if isinstance(end, graph.Node):
        return end
    entity_id = await entity_store.insert_entity_if_missing(conn, tenant, end)
    return graph.Node(entity_id, "entity", end.entity_class)


def _norm_or_422(name: str, field: str) -> str:
    norm = normalise_name(name)
    if not norm:
        raise InvalidInputError(field, "must contain a letter or digit")
    return norm
