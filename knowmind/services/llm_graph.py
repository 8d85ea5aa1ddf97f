"""The LLM graph extractor (``KNOWMIND_EXTRACTORS=...,llm``): a step of the extraction job that
asks the tenant's language model for each chunk's entities and typed relations
(``ingest.llm_graph``) and stores them as the other extractors' results are stored: entities
(origin ``llm``) with mentions, relations drawn through the ontology, provenance on the memory
(erasing it erases them). The model is asked first, outside any transaction; the results are
written in one. A relation the ontology refuses (unknown predicate, classes that do not fit) is
skipped and counted, never stored half."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from uuid import UUID

from knowmind.contract.drafts import RelationIn
from knowmind.db.engine import Database
from knowmind.errors import InvalidInputError
from knowmind.ingest.llm_graph import (
    ExtractedEntity,
    ExtractedRelation,
    default_prompt,
    extraction_messages,
    parse_extraction,
)
from knowmind.linking.names import normalise_name
from knowmind.models.llm import LLM, LLMUnavailableError
from knowmind.services.auth import Principal
from knowmind.services.graph import GraphService
from knowmind.services.tenant_settings import TenantSettingsService
from knowmind.store import edges as edge_store
from knowmind.store import entities as entity_store
from knowmind.store import memories as memory_store

__all__ = ["LLMGraphExtraction"]

MAX_CHUNKS = 50  # chunks of one memory sent to the model (the rest: counted as not read)
ANSWER_TOKENS = 384
CONFIDENCE = 0.6  # of what a small model extracted

ModelFor = Callable[[Principal], Awaitable[tuple[LLM | None, str | None]]]
Found = tuple[UUID, list[ExtractedEntity], list[ExtractedRelation]]


class LLMGraphExtraction:
    def __init__(
        self, db: Database, graph: GraphService, model_for: ModelFor, server_prompt: str | None
    ) -> None:
        self.db, self.graph, self.model_for = db, graph, model_for
        self.server_prompt = server_prompt
        self.tenant_settings = TenantSettingsService(db)

    async def __call__(self, tenant_id: UUID, memory_id: UUID) -> dict[str, Any]:
        who = Principal(tenant_id, frozenset({"write"}))
        llm, reason = await self.model_for(who)
        if llm is None:
            raise LLMUnavailableError(f"llm extraction: {reason}")
        async with self.db.tenant_tx(tenant_id) as conn:
            chunks = await memory_store.chunk_texts(conn, tenant_id, memory_id)
            ontology = await self.graph.ontology(conn, tenant_id)
        template = (await self.tenant_settings.get(who)).extraction_prompt or self.server_prompt
        if template is None:
            settable = [p for p in ontology.predicates.values() if not p.derived]
            template = default_prompt(
                ontology.classes,
                ((p.name, "|".join(sorted(p.subject_classes)), "|".join(sorted(p.object_classes)))
                 for p in settable),
            )  # fmt: skip
        found: list[Found] = []
        for chunk_id, content in chunks[:MAX_CHUNKS]:
            messages = extraction_messages(template, content)
            done = await llm.complete(messages, max_tokens=ANSWER_TOKENS)
            found.append((chunk_id, *parse_extraction(done.text, ontology.classes)))
        counts = await self._store(tenant_id, memory_id, found, f"{llm.provider}/{llm.model}")
        return counts | {"llm_chunks_not_read": max(0, len(chunks) - MAX_CHUNKS)}

    async def _store(
        self, tenant_id: UUID, memory_id: UUID, found: list[Found], model: str
    ) -> dict[str, int]:
        """Store what the model found; a single-valued fact it proposes replaces the current
        one as a relation given with the memory would (the audit entry names the model)."""
        counts = {"llm_entities": 0, "llm_relations": 0, "llm_relations_skipped": 0}
        async with self.db.tenant_tx(tenant_id, write=True) as conn:
            if not await memory_store.chunk_texts(conn, tenant_id, memory_id):
                return counts  # erased while the model read it
            mentions = []
            for chunk_id, entities, relations in found:
                classes = {normalise_name(e.name): e.entity_class for e in entities}
                for entity in entities:
                    new = entity_store.NewEntity(
                        name=entity.name,
                        norm_name=normalise_name(entity.name),
                        entity_class=entity.entity_class,
                        origin="llm",
                        confidence=CONFIDENCE,
                    )
                    if not new.norm_name:
                        continue
                    entity_id = await _entity(conn, tenant_id, new)
                    mentions.append((memory_id, chunk_id, entity_id, "llm", CONFIDENCE, None, None))
                    counts["llm_entities"] += 1
                for relation in relations:
                    inline = RelationIn(
                        predicate=relation.predicate,
                        object=relation.object,
                        object_class=classes.get(normalise_name(relation.object)),
                        confidence=CONFIDENCE,
                        subject=relation.subject,
                        subject_class=classes.get(normalise_name(relation.subject)),
                    )
                    try:
                        async with conn.begin_nested():
                            await self.graph.attach_inline_relations(
                                conn, tenant_id, memory_id, [inline], method="llm", model=model
                            )
                        counts["llm_relations"] += 1
                    except InvalidInputError:
                        counts["llm_relations_skipped"] += 1
            await edge_store.insert_mentions(conn, tenant_id, mentions)
        return counts


async def _entity(conn: Any, tenant_id: UUID, new: entity_store.NewEntity) -> UUID:
    """An existing entity of that name (its class first), else the new one."""
    existing = await entity_store.find_entities_by_norm(conn, tenant_id, new.norm_name)
    for entity in existing:
        if entity.entity_class == new.entity_class:
            return entity.id
    if existing:
        return existing[0].id
    return await entity_store.insert_entity_if_missing(conn, tenant_id, new)
