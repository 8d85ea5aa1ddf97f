"""Entities, relations and the tenant's relation catalogue."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.db.engine import Database
from knowmind.errors import ConflictError, InvalidInputError, NotFoundError
from knowmind.graph import postgres as graph
from knowmind.graph.ontology import Ontology, Predicate
from knowmind.linking.names import normalise_name
from knowmind.services.auth import Principal, tenant_of
from knowmind.store import edges as edge_store
from knowmind.store import entities as entity_store
from knowmind.store import ontology as ontology_store
from knowmind.store.entities import EntityRow, NewEntity

__all__ = ["GraphService", "InlineRelation", "PredicateDraft"]


@dataclass(frozen=True, slots=True, kw_only=True)
class InlineRelation:
    """A relation given with a memory: memory (or ``subject``) -predicate-> ``object``."""

    predicate: str
    object: str
    object_class: str | None = None
    object_description: str | None = None
    confidence: float = 1.0
    subject: str | None = None
    subject_class: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PredicateDraft:
    name: str
    subject_classes: list[str]
    object_classes: list[str]
    inverse: str | None = None
    symmetric: bool = False
    description: str | None = None
    new_classes: list[str] = field(default_factory=list)


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

    async def extend_schema(self, who: Principal, draft: PredicateDraft) -> Predicate:
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
            return await graph.link(
                conn, tenant, ontology, nodes["from_id"], nodes["to_id"], predicate, confidence
            )

    async def unlink(self, who: Principal, from_id: UUID, to_id: UUID, rel_type: str) -> int:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            ontology = await self.ontology(conn, tenant)
            predicate = ontology.settable(rel_type)
            return await graph.unlink(conn, tenant, ontology, from_id, to_id, predicate)

    async def relations(self, who: Principal, node_id: UUID) -> list[dict[str, Any]]:
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            await graph.resolve_nodes(conn, tenant, node_id=node_id)
            return await edge_store.node_relations(conn, tenant, node_id)

    async def link_supersedes(
        self,
        conn: AsyncConnection,
        tenant: UUID,
        new_id: UUID,
        old_id: UUID,
        reason: str | None,
    ) -> None:
        ontology = await self.ontology(conn, tenant)
        await graph.link(
            conn,
            tenant,
            ontology,
            graph.Node(new_id, "memory", None),
            graph.Node(old_id, "memory", None),
            ontology.predicate("SUPERSEDES"),
            properties={"reason": reason} if reason else None,
        )

    # -- inline relations of a new memory (inside the memory's transaction) ----------------

    async def attach_inline_relations(
        self,
        conn: AsyncConnection,
        tenant: UUID,
        memory_id: UUID,
        relations: list[InlineRelation],
        method: str = "inline",
    ) -> None:
        """Draw the relations (entities found or created); ``method``: how they were found
        (``inline``: given with the memory, ``llm``: the LLM extractor), kept on the mentions."""
        ontology = await self.ontology(conn, tenant)
        memory = graph.Node(memory_id, "memory", None)
        mentions = []
        for i, relation in enumerate(relations):
            field_prefix = f"relations[{i}]"
            predicate = ontology.settable(relation.predicate, f"{field_prefix}.predicate")
            target = await self._find_or_create(
                conn,
                tenant,
                ontology,
                relation.object,
                relation.object_class,
                predicate.object_classes,
                relation.object_description,
                f"{field_prefix}.object",
                origin=method,
            )
            source = memory
            if relation.subject:
                source = await self._find_or_create(
                    conn,
                    tenant,
                    ontology,
                    relation.subject,
                    relation.subject_class,
                    predicate.subject_classes,
                    None,
                    f"{field_prefix}.subject",
                    origin=method,
                )
                mentions.append(
                    (memory_id, None, source.id, method, relation.confidence, None, None)
                )
            # provenance: erasing the memory erases the edges its relations drew
            provenance = {"source_memory_id": str(memory_id)}
            await graph.link(
                conn, tenant, ontology, source, target, predicate, relation.confidence, provenance
            )
            mentions.append((memory_id, None, target.id, method, relation.confidence, None, None))
        await edge_store.insert_mentions(conn, tenant, mentions)

    async def _find_or_create(
        self,
        conn: AsyncConnection,
        tenant: UUID,
        ontology: Ontology,
        name: str,
        entity_class: str | None,
        fitting: frozenset[str],
        description: str | None,
        field: str,
        *,
        origin: str = "inline",
    ) -> graph.Node:
        norm = _norm_or_422(name, field)
        if entity_class is not None:
            ontology.check_class(entity_class, f"{field}_class")
        else:
            existing = [
                e
                for e in await entity_store.find_entities_by_norm(conn, tenant, norm)
                if e.entity_class in fitting
            ]
            if len(existing) == 1:
                return graph.Node(existing[0].id, "entity", existing[0].entity_class)
            if len(fitting) != 1:
                raise InvalidInputError(
                    field, f"{name!r}: give its class, one of {sorted(fitting)}"
                )
            entity_class = next(iter(fitting))
        new = NewEntity(
            name=name.strip(),
            norm_name=norm,
            entity_class=entity_class,
            description=description,
            origin=origin,
        )
        entity_id = await entity_store.insert_entity_if_missing(conn, tenant, new)
        return graph.Node(entity_id, "entity", entity_class)


def _norm_or_422(name: str, field: str) -> str:
    norm = normalise_name(name)
    if not norm:
        raise InvalidInputError(field, "must contain a letter or digit")
    return norm
