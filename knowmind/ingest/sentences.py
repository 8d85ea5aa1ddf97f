"""Sentence vectors of a memory's chunks (``chunks.sentence_vectors``), made by the extraction
job after the memory commits, never on the write path.

A question is usually about one sentence of a paragraph, and the paragraph's one embedding
dilutes it (worst across languages, where no word of the question appears in the text); the
ranker reads the question's cosine to each short-listed chunk's closest sentence. A chunk of
one sentence has its own vector already and gets none.
"""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from knowmind.ingest.chunker import split_sentences
from knowmind.ingest.pipeline import embed_each, passage_text
from knowmind.models.executor import EmbeddingExecutor
from knowmind.store.sentences import pack_vectors

__all__ = ["SENTENCE_JOB", "chunk_sentence_vectors", "sentences_of"]

# A job that makes a memory's sentence vectors alone (the memories written before they existed,
# queued by migration 0024; an imported archive's): ``Extraction`` with no extractors.
SENTENCE_JOB = "embed_sentences"

MIN_SENTENCE_CHARS = 20  # shorter pieces (a heading, "Yes.") say too little on their own
MAX_SENTENCES = 16  # per chunk (a chunk holds about 1,000 characters)


def sentences_of(content: str) -> list[str]:
    """The sentences of a chunk worth a vector of their own; none for a single sentence."""
    found = [s for s in split_sentences(content) if len(s) >= MIN_SENTENCE_CHARS]
    return found[:MAX_SENTENCES] if len(found) > 1 else []


async def chunk_sentence_vectors(
    embedder: EmbeddingExecutor,
    owner: str,
    title: str | None,
    chunks: Sequence[tuple[UUID, str]],
) -> list[tuple[UUID, bytes]]:
    """(chunk id, packed vectors) for the chunks of two or more sentences, each sentence
    embedded with the memory's title as its chunk is; ``owner`` (the tenant) takes its fair turn
    in the embedding queue."""
    split = [(chunk_id, sentences_of(content)) for chunk_id, content in chunks]
    split = [(chunk_id, sentences) for chunk_id, sentences in split if sentences]
    if not split:
        return []
    passages = [[passage_text(title, s) for s in sentences] for _, sentences in split]
    vectors = await embed_each(embedder, passages, owner)
    return [(chunk_id, pack_vectors(v)) for (chunk_id, _), v in zip(split, vectors, strict=True)]
