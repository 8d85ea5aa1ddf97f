"""The one way a memory enters the store: the memory row, its chunks, the relations given with
it, and the extraction job, in the caller's transaction. Remember, supersede and document upload
all write through ``insert_memory`` (a batch through ``insert_memories``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from uuid import UUID

import numpy as np
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.contract.drafts import RelationIn
from knowmind.db.engine import Database
from knowmind.ingest.extract import EXTRACT_JOB
from knowmind.ingest.pipeline import content_language, index_language
from knowmind.models.executor import EmbeddingExecutor
from knowmind.recall.timeframe import mentions_time
from knowmind.services.auth import Principal, tenant_of
from knowmind.services.graph import GraphService
from knowmind.services.job_quota import JobQuota
from knowmind.settings import IngestSettings
from knowmind.store import memories as memory_store

__all__ = ["MemoryWriter", "insert_memories", "insert_memory"]


@dataclass(eq=False)
class MemoryWriter:
    """What a service that writes memories needs (the memory and the document services)."""

    db: Database
    embedder: EmbeddingExecutor
    ingest: IngestSettings
    graph: GraphService
    on_job_enqueued: Callable[[], None] = lambda: None

    def __post_init__(self) -> None:
        self.quota = JobQuota.of(self.ingest)  # on the tenant's queued background work
        # index each memory in its detected language rather than the tenant's (BM25 stage)
        self._detect_language = self.ingest.bm25_memory_language == "on"

    def language_of(self, tenant_language: str, content: str) -> str:
        """The text-search configuration this memory's chunks are indexed with."""
        return index_language(tenant_language, content, self._detect_language)

    async def write(
        self,
        conn: AsyncConnection,
        who: Principal,
        memory: memory_store.Draft,
        sha256: bytes,
        contents: Sequence[str],
        embeddings: np.ndarray,
        *,
        relations: Sequence[RelationIn] = (),
        kinds: Sequence[str | None] = (),
        document_id: UUID | None = None,
    ) -> memory_store.InsertedMemory | None:
        """``insert_memory`` for the writer ``who``: through this service's graph, its chunks
        indexed in the memory's language (``language_of``)."""
        return await insert_memory(
            conn,
            tenant_of(who),
            memory,
            sha256,
            language=self.language_of(who.language, memory.content),
            contents=contents,
            embeddings=embeddings,
            graph=self.graph,
            relations=relations,
            kinds=kinds,
            who=who,
            document_id=document_id,
        )


async def insert_memory(
    conn: AsyncConnection,
    tenant: UUID,
    memory: memory_store.Draft,
    sha256: bytes,
    *,
    language: str,
    contents: Sequence[str],
    embeddings: np.ndarray,
    graph: GraphService,
    relations: Sequence[RelationIn] = (),
    kinds: Sequence[str | None] = (),
    who: Principal | None = None,
    document_id: UUID | None = None,
) -> memory_store.InsertedMemory | None:
    """The draft under its key ``sha256``; None when a current memory with the same key exists
    (nothing was written). ``who``: the writer, named in the audit entry of a fact its
    relations replace; ``document_id``: the document whose text the memory holds.

    The caller wakes the job worker once its transaction has committed.
    """
    item = memory_store.MemoryToInsert(
        memory,
        sha256,
        language,
        contents,
        embeddings,
        kinds,
        content_language(memory.content),
        document_id=document_id,
    )
    inserted = await memory_store.insert_memory(
        conn, tenant, _with_time_statement(item), job_kind=EXTRACT_JOB
    )
    if inserted is not None and relations:
        await graph.attach_inline_relations(conn, tenant, inserted.id, list(relations), who=who)
    return inserted


async def insert_memories(
    conn: AsyncConnection, tenant: UUID, items: Sequence[memory_store.MemoryToInsert]
) -> list[memory_store.InsertedMemory | None]:
    """``insert_memory`` for many memories without relations, in one statement (see
    ``store.memories.insert_memories``)."""
    stating = [_with_time_statement(item) for item in items]
    return await memory_store.insert_memories(conn, tenant, stating, job_kind=EXTRACT_JOB)


def _with_time_statement(item: memory_store.MemoryToInsert) -> memory_store.MemoryToInsert:
    """The item with ``states_time`` read from its content (the time stage's "when" search)."""
    return replace(item, states_time=mentions_time(item.memory.content))
