"""What can be done to the retrieved passages before generation (the Ragen seed's enhancers):

- ``parent_context``: each passage becomes its chunk with the neighbouring chunks of its memory
  (small-to-big: the match is found on a small chunk, the model reads the larger context);
- ``compress``: each passage keeps only its sentences relevant to the question — those whose
  embedding is at least as similar to the question's as the average sentence of all passages,
  and always its best one — so the model reads less and less noise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from uuid import UUID

import numpy as np

from knowmind.answer.base import Passage
from knowmind.db.engine import Database
from knowmind.models.executor import EmbeddingExecutor
from knowmind.store.search import chunk_windows

__all__ = ["compress", "with_parent_context"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-ZÄÖÜ0-9\"'(])")


async def with_parent_context(
    db: Database, tenant: UUID, passages: Sequence[Passage]
) -> list[Passage]:
    async with db.read(tenant) as conn:
        windows = await chunk_windows(conn, tenant, [p.chunk_id for p in passages])
    return [replace(p, content=windows.get(p.chunk_id, p.content)) for p in passages]


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


async def compress(
    embedder: EmbeddingExecutor, owner: str, question: str, passages: Sequence[Passage]
) -> tuple[list[Passage], dict[str, int]]:
    """The passages with only their relevant sentences, and how many sentences were kept of
    how many."""
    split = [sentences(p.content) or [p.content] for p in passages]
    flat = [s for group in split for s in group]
    if not flat:
        return list(passages), {"kept": 0, "of": 0}
    query = (await embedder.embed_queries([question]))[0]
    vectors = await embedder.embed_passages(flat, owner)
    similarity = np.asarray(vectors) @ np.asarray(query)
    bar = float(similarity.mean())
    kept_passages, kept, start = [], 0, 0
    for passage, group in zip(passages, split, strict=True):
        scores = similarity[start : start + len(group)]
        start += len(group)
        best = int(np.argmax(scores))
        keep = [s for i, s in enumerate(group) if scores[i] >= bar or i == best]
        kept += len(keep)
        kept_passages.append(replace(passage, content=" ".join(keep)))
    return kept_passages, {"kept": kept, "of": len(flat)}
