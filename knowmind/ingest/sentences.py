"""Sentence vectors of a memory's chunks (``chunk_sentences``), made by the extraction job
after the memory commits, never on the write path.

A question is usually about one sentence of a paragraph, and the paragraph's one embedding
dilutes it (worst across languages, where no word of the question appears in the text); the
ranker reads the question's cosine to each short-listed chunk's closest sentence. A chunk of
one sentence has its own vector already and gets none. Each sentence is embedded with its
memory's title, as a document's chunk is (a conversation turn's sentences without the earlier
turns its chunk is embedded with: the sentence's own words are what it adds).

``SentenceBackfill`` (the ``embed_sentences`` job, one per tenant) walks the tenant's chunks
that have none: those written before sentence vectors existed (migration 0024), an imported
archive's, and those whose extraction found the embedder too busy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from knowmind.db.engine import Database
from knowmind.ingest.chunker import split_sentences
from knowmind.ingest.pipeline import embed_each, passage_text
from knowmind.models.executor import EmbeddingExecutor
from knowmind.store.jobs import JobRow, JobStep
from knowmind.store.sentences import (
    ChunkText,
    chunks_without_sentences,
    pack_vectors,
    set_sentence_vectors,
)

__all__ = ["SENTENCE_JOB", "SentenceBackfill", "chunk_sentence_vectors", "sentences_of"]

SENTENCE_JOB = "embed_sentences"
MIN_SENTENCE_CHARS = 20  # shorter pieces (a heading, "Yes.") say too little on their own
MAX_SENTENCES = 16  # per chunk (a chunk holds about 1,000 characters); the rest go without
STEP_CHUNKS = 16  # chunks per step of the backfill (as a document ingest step embeds)


def sentences_of(content: str) -> list[str]:
    """The sentences of a chunk worth a vector of their own; none for a single sentence."""
    found = [s for s in split_sentences(content) if len(s) >= MIN_SENTENCE_CHARS]
    return found[:MAX_SENTENCES] if len(found) > 1 else []


async def chunk_sentence_vectors(
    embedder: EmbeddingExecutor, owner: str, chunks: Sequence[ChunkText]
) -> list[tuple[UUID, bytes]]:
    """(chunk id, packed vectors) for the chunks of two or more sentences; ``owner`` (the
    tenant) takes its fair turn in the embedding queue."""
    split = [(c, sentences_of(c.content)) for c in chunks]
    split = [(c, sentences) for c, sentences in split if sentences]
    if not split:
        return []
    passages = [[passage_text(c.title, s) for s in sentences] for c, sentences in split]
    vectors = await embed_each(embedder, passages, owner)
    return [(c.id, pack_vectors(v)) for (c, _), v in zip(split, vectors, strict=True)]


@dataclass(slots=True)
class SentenceBackfill:
    """The ``embed_sentences`` job: the tenant's chunks without sentence vectors, ``STEP_CHUNKS``
    at a time in id order (the position is the job's progress). A worker with
    ``KNOWMIND_SENTENCE_VECTORS=off`` does not take these jobs: they wait for one with it on."""

    db: Database
    embedder: EmbeddingExecutor

    async def __call__(self, tenant_id: UUID, payload: dict[str, Any]) -> dict[str, Any]:
        state: dict[str, Any] = {}
        while not (step := await self._step(tenant_id, state)).done:
            pass
        return step.result or {}

    async def step(self, job: JobRow, state: dict[str, Any]) -> JobStep:
        if "after" not in state:  # this job's first step in this process
            progress = job.progress or {}
            state["after"] = UUID(progress["after"]) if progress.get("after") else None
            state["chunks"] = int(progress.get("chunks", 0))
        return await self._step(job.tenant_id, state)

    async def _step(self, tenant_id: UUID, state: dict[str, Any]) -> JobStep:
        after, made = state.get("after"), int(state.get("chunks", 0))
        async with self.db.tenant_tx(tenant_id) as conn:
            chunks = await chunks_without_sentences(conn, tenant_id, after, STEP_CHUNKS)
        if not chunks:
            return JobStep(done=True, result={"chunks": made})
        vectors = await chunk_sentence_vectors(self.embedder, str(tenant_id), chunks)
        async with self.db.tenant_tx(tenant_id) as conn:
            await set_sentence_vectors(conn, tenant_id, vectors)
        state["after"], state["chunks"] = chunks[-1].id, made + len(vectors)
        progress = {"after": str(chunks[-1].id), "chunks": state["chunks"]}
        return JobStep(done=False, progress=progress)
