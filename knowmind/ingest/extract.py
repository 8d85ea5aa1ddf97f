"""Extraction after a memory commits: mentions of known entities (gazetteer), candidate
entities from named-entity recognition, and the chunks' sentence vectors
(``ingest.sentences``, where an embedder is given). Runs as a background job, never on the
write path.

``llm``: the LLM graph extractor (``services.llm_graph``, handed in by the runtime: it needs the
tenant's language model and the graph service) runs after the others, in its own transaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.contract.limits import NAME_MAX_CHARS
from knowmind.db.engine import Database
from knowmind.errors import OverloadedError
from knowmind.ingest.ner import Recogniser, RuleRecogniser, Span, spacy_recogniser
from knowmind.ingest.sentences import SENTENCE_JOB, chunk_sentence_vectors
from knowmind.ingest.sentences import STEP_CHUNKS as SENTENCE_STEP_CHUNKS
from knowmind.linking.gazetteer import find_known_entities
from knowmind.linking.names import normalise_name
from knowmind.models.executor import EmbeddingExecutor
from knowmind.store import edges as edge_store
from knowmind.store import entities as entity_store
from knowmind.store import memories as memory_store
from knowmind.store.jobs import JobRow, JobStep
from knowmind.store.sentences import ChunkText, queue_sentence_job, set_sentence_vectors
from knowmind.store.tenants import tenant_language

__all__ = ["AVAILABLE_EXTRACTORS", "EXTRACT_JOB", "STEP_CHUNKS", "Extraction", "build_recognisers"]

log = structlog.get_logger(__name__)

EXTRACT_JOB = "extract_mentions"
AVAILABLE_EXTRACTORS = ("gazetteer", "ner", "llm")
# (tenant, memory) → counts: the LLM graph extractor
LLMGraphStep = Callable[[UUID, UUID], Awaitable[dict[str, Any]]]


def build_recognisers(extractors: list[str], language: str) -> list[Recogniser]:
    if "ner" not in extractors:
        return []
    recognisers: list[Recogniser] = [RuleRecogniser()]
    english = spacy_recogniser() if language == "english" else None
    if english is not None:
        recognisers.append(english)
    return recognisers


# Chunks scanned per step of a job: a large document's extraction takes turns with the other
# tenants' jobs between steps (well under a second each on a small host).
STEP_CHUNKS = 32
_NO_COUNTS = {"gazetteer": 0, "ner": 0, "entities_created": 0, "spans_skipped": 0}


@dataclass(slots=True)
class Extraction:
    """The job handler: ``await Extraction(db, extractors)(tenant_id, payload)`` runs it all at
    once; the worker runs it in steps of ``STEP_CHUNKS`` chunks (``step``)."""

    db: Database
    extractors: list[str]
    llm_graph: LLMGraphStep | None = None
    sentences: EmbeddingExecutor | None = None  # embeds the chunks' sentences; None: no vectors

    async def __call__(self, tenant_id: UUID, payload: dict[str, Any]) -> dict[str, Any]:
        memory_id = UUID(payload["memory_id"])
        async with self.db.tenant_tx(tenant_id) as conn:
            language, chunks = await self._chunks(conn, tenant_id, memory_id)
        if not chunks:
            return {"skipped": "memory no longer exists"}
        vectors = await self._sentence_vectors(tenant_id, chunks, chunks)
        async with self.db.tenant_tx(tenant_id) as conn:
            counts = dict(_NO_COUNTS)
            recognisers = build_recognisers(self.extractors, language or "")
            await self._scan(conn, tenant_id, memory_id, chunks, recognisers, counts)
            await self._store_sentence_vectors(conn, tenant_id, vectors)
        if "llm" in self.extractors and self.llm_graph is not None:
            return counts | await self.llm_graph(tenant_id, memory_id)
        return counts

    async def step(self, job: JobRow, state: dict[str, Any]) -> JobStep:
        """Scan the next ``STEP_CHUNKS`` chunks (``SENTENCE_STEP_CHUNKS`` where it embeds their
        sentences; the mentions and vectors of each step committed with it;
        a step repeated after a takeover adds nothing twice: mentions are unique per memory,
        entity and method), then the LLM graph extractor as a step of its own."""
        tenant_id, memory_id = job.tenant_id, UUID(job.payload["memory_id"])
        if "chunks" not in state:  # this job's first step in this process
            progress = job.progress or {}
            state["next"] = int(progress.get("next_chunk", 0))
            state["counts"] = dict(_NO_COUNTS) | dict(progress.get("counts") or {})
            async with self.db.tenant_tx(tenant_id) as conn:
                language, state["chunks"] = await self._chunks(conn, tenant_id, memory_id)
            state["recognisers"] = build_recognisers(self.extractors, language or "")
        chunks: list[tuple[UUID | None, str]] = state["chunks"]
        counts: dict[str, Any] = state["counts"]
        if not chunks:
            return JobStep(done=True, result={"skipped": "memory no longer exists"})
        start = state["next"]
        if start < len(chunks):
            size = STEP_CHUNKS if self.sentences is None else SENTENCE_STEP_CHUNKS
            end = min(len(chunks), start + size)
            vectors = await self._sentence_vectors(tenant_id, chunks, chunks[start:end])
            async with self.db.tenant_tx(tenant_id) as conn:
                await self._scan(
                    conn, tenant_id, memory_id, chunks[start:end], state["recognisers"], counts
                )
                await self._store_sentence_vectors(conn, tenant_id, vectors)
            state["next"] = end
            llm_left = "llm" in self.extractors and self.llm_graph is not None
            if end < len(chunks) or llm_left:
                progress = {"chunks": len(chunks), "next_chunk": end, "counts": counts}
                return JobStep(done=False, progress=progress)
            return JobStep(done=True, result=counts)
        assert self.llm_graph is not None  # all scanned: the LLM graph extractor is left
        return JobStep(done=True, result=counts | await self.llm_graph(tenant_id, memory_id))

    async def _sentence_vectors(
        self,
        tenant_id: UUID,
        chunks: list[tuple[UUID | None, str]],
        part: list[tuple[UUID | None, str]],
    ) -> list[tuple[UUID, bytes]] | None:
        """The sentence vectors of ``part`` of the memory's ``chunks`` (embedded before the
        step's transaction opens); none without an embedder; None when the embedder is too busy
        (the mentions do not wait for them: the tenant's ``embed_sentences`` job makes them)."""
        if self.sentences is None:
            return []
        title = next((content for chunk_id, content in chunks if chunk_id is None), None)
        texts = [ChunkText(i, content, title) for i, content in part if i is not None]
        try:
            return await chunk_sentence_vectors(self.sentences, str(tenant_id), texts)
        except OverloadedError:
            log.info("extract.sentences_deferred", tenant_id=str(tenant_id))
            return None

    @staticmethod
    async def _store_sentence_vectors(
        conn: AsyncConnection, tenant_id: UUID, vectors: list[tuple[UUID, bytes]] | None
    ) -> None:
        if vectors is None:
            await queue_sentence_job(conn, tenant_id, SENTENCE_JOB)
        else:
            await set_sentence_vectors(conn, tenant_id, vectors)

    @staticmethod
    async def _chunks(
        conn: AsyncConnection, tenant_id: UUID, memory_id: UUID
    ) -> tuple[str | None, list[tuple[UUID | None, str]]]:
        """The tenant's language, and the memory's chunks to scan (none: it is gone)."""
        language = await tenant_language(conn, tenant_id)
        chunks: list[tuple[UUID | None, str]] = list(
            await memory_store.chunk_texts(conn, tenant_id, memory_id)
        )
        if not chunks:
            return language, []
        title = await memory_store.memory_title(conn, tenant_id, memory_id)
        if title:  # the title is scanned too (last: a mention in the text wins)
            chunks = [*chunks, (None, title)]
        return language, chunks

    async def _scan(
        self,
        conn: AsyncConnection,
        tenant_id: UUID,
        memory_id: UUID,
        chunks: list[tuple[UUID | None, str]],
        recognisers: list[Recogniser],
        counts: dict[str, Any],
    ) -> None:
        """Find and store the chunks' mentions, adding to ``counts``; nothing where the memory
        was erased since its chunks were read (its mentions would outlive it)."""
        if not await memory_store.hold_memory(conn, tenant_id, memory_id):
            return
        mentions: list[tuple[Any, ...]] = []
        spans: list[tuple[UUID | None, Span]] = []
        for chunk_id, content in chunks:
            if "gazetteer" in self.extractors:
                for hit in await find_known_entities(conn, tenant_id, content):
                    mentions.append(
                        (memory_id, chunk_id, hit.entity_id, "gazetteer", 0.9, hit.start, hit.end)
                    )
                    counts["gazetteer"] += 1
            for recogniser in recognisers:
                for span in recogniser.find(content):
                    if _nameable(span.text):
                        spans.append((chunk_id, span))
                    else:
                        counts["spans_skipped"] += 1
        entity_of = await _candidates(conn, tenant_id, [span for _, span in spans], counts)
        for chunk_id, span in spans:
            entity_id = entity_of[(normalise_name(span.text), span.entity_class)]
            mentions.append(
                (memory_id, chunk_id, entity_id, "ner", span.confidence, span.start, span.end)
            )
            counts["ner"] += 1
        await edge_store.insert_mentions(conn, tenant_id, mentions)


def _nameable(text: str) -> bool:
    """Whether a recognised span can name an entity: an NER model sometimes returns a whole
    run-on passage (over the name limit) or only punctuation (nothing left once normalised);
    such a span failed the job on every retry."""
    return len(text) <= NAME_MAX_CHARS and bool(normalise_name(text))


async def _candidates(
    conn: AsyncConnection, tenant_id: UUID, spans: list[Span], counts: dict[str, Any]
) -> dict[tuple[str, str], UUID]:
    """An entity for each (normalised name, class) of the spans, found or created in name order
    (two extractions creating the same new names lock them in one order, never crosswise);
    a name's classes in the order the text gives them."""
    first: dict[tuple[str, str], Span] = {}
    for span in spans:
        first.setdefault((normalise_name(span.text), span.entity_class), span)
    order = sorted(first, key=lambda key: key[0])  # stable: a name's classes keep text order
    found: dict[tuple[str, str], UUID] = {}
    for key in order:
        found[key], created = await _candidate(conn, tenant_id, first[key])
        counts["entities_created"] += created
    return found


async def _candidate(conn: AsyncConnection, tenant_id: UUID, span: Span) -> tuple[UUID, int]:
    """An entity for a recognised span: an existing one with that name (any class), else a new
    candidate of the recognised class."""
    norm = normalise_name(span.text)
    existing = await entity_store.find_entities_by_norm(conn, tenant_id, norm)
    for entity in existing:
        if entity.entity_class == span.entity_class:
            return entity.id, 0
    if existing:
        return existing[0].id, 0
    new = entity_store.NewEntity(
        name=span.text,
        norm_name=norm,
        entity_class=span.entity_class,
        origin="ner",
        confidence=span.confidence,
    )
    entity_id = await entity_store.insert_entity_if_missing(conn, tenant_id, new)
    return entity_id, 1
