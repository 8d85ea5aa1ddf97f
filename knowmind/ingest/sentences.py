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

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from knowmind.db.engine import Database
from knowmind.errors import OverloadedError
from knowmind.ingest.chunker import split_sentences
from knowmind.ingest.pipeline import embed_each, passage_text
from knowmind.models.executor import EmbeddingExecutor
from knowmind.store.jobs import JobRow, JobStep
from knowmind.store.sentences import (
    ChunkText,
    chunks_without_sentences,
    pack_vectors,
    queue_sentence_job,
    set_sentence_vectors,
)

__all__ = ["SENTENCE_JOB", "SentenceBackfill", "chunk_sentence_vectors", "sentences_of"]

SENTENCE_JOB = "embed_sentences"
MIN_SENTENCE_CHARS = 20  # shorter pieces (a heading, "Yes.") say too little on their own
MAX_SENTENCES = 16  # per chunk (a chunk holds about 1,000 characters); the rest go without
# chunks per step whose sentences are embedded, here and in an extraction (as many as a
# document ingest step embeds, ``services.document_jobs.STEP_CHUNKS``)
STEP_CHUNKS = 16
JOB_STEPS = 64  # steps of one backfill job before it hands over to its successor
OVERLOADED_PAUSE_S = 1.0  # a step that found the embedder too busy waits this long


def sentences_of(content: str) -> list[str]:
    """The sentences of a chunk worth a vector of their own; none for a single sentence."""
    found = [s for s in split_sentences(content) if len(s) >= MIN_SENTENCE_CHARS]
    return found[:MAX_SENTENCES] if len(found) > 1 else []


async def chunk_sentence_vectors(
    embedder: EmbeddingExecutor, owner: str, chunks: Sequence[ChunkText]
) -> list[tuple[UUID, bytes]]:
    """(chunk id, packed vectors) for each chunk: empty for a chunk of one sentence (stored
    too, so that no later walk looks at it again); ``owner`` (the tenant) takes its fair turn
    in the embedding queue."""
    split = [(c, sentences_of(c.content)) for c in chunks]
    made = [(c, sentences) for c, sentences in split if sentences]
    vectors = (
        await embed_each(
            embedder, [[passage_text(c.title, s) for s in ss] for c, ss in made], owner
        )
        if made
        else []
    )
    packed = {c.id: pack_vectors(v) for (c, _), v in zip(made, vectors, strict=True)}
    return [(c.id, packed.get(c.id, b"")) for c in chunks]


@dataclass(slots=True)
class SentenceBackfill:
    """The ``embed_sentences`` job: the tenant's chunks without sentence vectors, ``STEP_CHUNKS``
    at a time in id order (the position is the job's progress). After ``JOB_STEPS`` steps it
    ends and queues its successor from where it stopped, so that the tenant's other long jobs
    (a document, a summary tree) take their turn between. ``embedder`` None
    (``KNOWMIND_SENTENCE_VECTORS=off``): the job ends at once, nothing made."""

    db: Database
    embedder: EmbeddingExecutor | None

    async def __call__(self, tenant_id: UUID, payload: dict[str, Any]) -> dict[str, Any]:
        state = self._start(payload, None)
        while not (step := await self._step(tenant_id, state)).done:
            pass
        return step.result or {}

    async def step(self, job: JobRow, state: dict[str, Any]) -> JobStep:
        if "after" not in state:  # this job's first step in this process
            state.update(self._start(job.payload, job.progress))
        return await self._step(job.tenant_id, state)

    @staticmethod
    def _start(payload: dict[str, Any], progress: dict[str, Any] | None) -> dict[str, Any]:
        at = (progress or {}).get("after") or payload.get("after")
        return {
            "after": UUID(at) if at else None,
            "chunks": int((progress or {}).get("chunks", 0)),
            "steps": int((progress or {}).get("steps", 0)),
        }

    async def _step(self, tenant_id: UUID, state: dict[str, Any]) -> JobStep:
        if self.embedder is None:
            return JobStep(done=True, result={"chunks": 0, "skipped": "sentence vectors off"})
        async with self.db.tenant_tx(tenant_id) as conn:
            chunks = await chunks_without_sentences(conn, tenant_id, state["after"], STEP_CHUNKS)
        if not chunks:
            return JobStep(done=True, result={"chunks": state["chunks"]})
        try:
            vectors = await chunk_sentence_vectors(self.embedder, str(tenant_id), chunks)
        except OverloadedError:  # the same step again after the others' turns
            await asyncio.sleep(OVERLOADED_PAUSE_S)
            return JobStep(done=False, progress=_progress(state))
        state["after"], state["steps"] = chunks[-1].id, state["steps"] + 1
        state["chunks"] += sum(1 for _, v in vectors if v)
        async with self.db.tenant_tx(tenant_id) as conn:
            await set_sentence_vectors(conn, tenant_id, vectors)
            if state["steps"] >= JOB_STEPS:
                await queue_sentence_job(conn, tenant_id, SENTENCE_JOB, after=state["after"])
        if state["steps"] >= JOB_STEPS:
            return JobStep(done=True, result={"chunks": state["chunks"], "continued": True})
        return JobStep(done=False, progress=_progress(state))


def _progress(state: dict[str, Any]) -> dict[str, Any]:
    after = state["after"]
    return {"after": str(after) if after else None, "chunks": state["chunks"],
            "steps": state["steps"]}  # fmt: skip
