"""Turn a memory's text into chunks and their embeddings (before any transaction opens)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, pairwise

import numpy as np

from knowmind.ingest.chunker import chunk_text
from knowmind.models.executor import EmbeddingExecutor
from knowmind.models.language import language_detector

__all__ = [
    "PreparedChunks",
    "content_language",
    "embed_each",
    "index_language",
    "prepare_chunks",
]


@dataclass(frozen=True, slots=True)
class PreparedChunks:
    contents: list[str]
    embeddings: np.ndarray


def passage_text(title: str | None, chunk: str) -> str:
    """What gets embedded: the title gives every chunk of a memory its context."""
    return f"{title}\n{chunk}" if title else chunk


async def prepare_chunks(
    embedder: EmbeddingExecutor,
    title: str | None,
    content: str,
    target_chars: int,
    overlap_chars: int,
    owner: str = "",
) -> PreparedChunks:
    """Chunks and their embeddings; ``owner`` (the tenant) takes its fair turn in the
    embedding queue."""
    contents = chunk_text(content, target_chars, overlap_chars) or [content.strip()]
    texts = [passage_text(title, c) for c in contents]
    embeddings = await embedder.embed_passages(texts, owner)
    return PreparedChunks(contents=contents, embeddings=embeddings)


async def embed_each(
    embedder: EmbeddingExecutor, passages: Sequence[Sequence[str]], owner: str
) -> list[np.ndarray]:
    """Several items' passages embedded in one call (the executor batches them, taking turns
    with other owners), the vectors split back per item."""
    vectors = await embedder.embed_passages([text for item in passages for text in item], owner)
    bounds = accumulate((len(item) for item in passages), initial=0)
    return [vectors[start:end] for start, end in pairwise(bounds)]


def index_language(tenant_language: str, content: str, detect: bool) -> str:
    """The text-search configuration a memory is indexed with: the tenant's; in a language-
    neutral (``simple``) tenant with ``detect`` on, the memory's own language when it is clear,
    so each memory of a mixed-language tenant is stemmed in its language."""
    if not detect or tenant_language != "simple":
        return tenant_language
    return language_detector().detect(content) or tenant_language


# Language identification reads this much of a memory: enough to be sure, cheap for a book.
LANGUAGE_SAMPLE_CHARS = 2000


def content_language(content: str) -> str | None:
    """The language a memory is written in (a text-search configuration name), None when the
    detector is unsure (a short or mixed text)."""
    return language_detector().detect(content[:LANGUAGE_SAMPLE_CHARS])
