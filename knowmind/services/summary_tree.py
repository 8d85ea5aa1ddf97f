"""RAPTOR summary trees: the background job that builds a document's tree (``build_tree: true``
on an upload) and the search the ``raptor`` answer method makes over the tenant's trees.

The job reads the document's chunks and their embeddings, clusters and summarises them with the
tenant's language model (``ingest.raptor``), embeds the summaries with the server's embedder and
replaces the document's tree in one transaction. A document changed or erased meanwhile is
left alone (the job answers ``skipped``); a model that cannot answer fails the job with the
reason (it is retried as any job, then recorded as failed).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from uuid import UUID

import numpy as np

from knowmind.db.engine import Database
from knowmind.ingest.raptor import build_tree
from knowmind.models.executor import EmbeddingExecutor
from knowmind.models.llm import LLM, LLMUnavailableError, Message
from knowmind.services.auth import Principal
from knowmind.store import summaries as summary_store
from knowmind.store.search import MemoryFilters
from knowmind.store.summaries import NewSummary

__all__ = ["SummarySearch", "SummaryTreeJob", "summary_prompt"]

MEMBER_CHARS = 700  # of each chunk or summary shown to the model (a small model's context)
SUMMARY_TOKENS = 160

ModelFor = Callable[[Principal], Awaitable[tuple[LLM | None, str | None]]]


def summary_prompt(texts: Sequence[str]) -> list[Message]:
    numbered = "\n\n".join(f"[{n}] {t[:MEMBER_CHARS]}" for n, t in enumerate(texts, start=1))
    return [
        {
            "role": "system",
            "content": "Summarise the passages in three or four sentences: the main facts, "
            "names and numbers they share. Write in the passages' language. Output only the "
            "summary.",
        },
        {"role": "user", "content": numbered},
    ]


class SummaryTreeJob:
    """The job handler: ``payload = {"document_id", "language"}``."""

    def __init__(self, db: Database, embedder: EmbeddingExecutor, model_for: ModelFor) -> None:
        self.db, self.embedder, self.model_for = db, embedder, model_for

    async def __call__(self, tenant_id: UUID, payload: dict[str, Any]) -> dict[str, Any]:
        document_id = UUID(payload["document_id"])
        who = Principal(tenant_id, frozenset({"write"}), language=payload.get("language", ""))
        llm, reason = await self.model_for(who)
        if llm is None:
            raise LLMUnavailableError(f"no summary tree: {reason}")
        async with self.db.tenant_tx(tenant_id) as conn:
            leaves = await summary_store.document_leaves(conn, tenant_id, document_id)
        if leaves is None:
            return {"skipped": "the document no longer exists"}

        async def summarise(texts: Sequence[str]) -> str:
            done = await llm.complete(summary_prompt(texts), max_tokens=SUMMARY_TOKENS)
            return done.text.strip() or " ".join(t[:200] for t in texts)

        async def embed(texts: Sequence[str]) -> np.ndarray:
            return await self.embedder.embed_passages(list(texts), owner=str(tenant_id))

        nodes = await build_tree(leaves.contents, leaves.embeddings, summarise, embed)
        async with self.db.tenant_tx(tenant_id, write=True) as conn:
            current = await summary_store.document_leaves(conn, tenant_id, document_id)
            if current is None or current.memory_id != leaves.memory_id:
                return {"skipped": "the document changed while its tree was built"}
            await summary_store.delete_document_tree(conn, tenant_id, document_id)
            await summary_store.insert_summaries(
                conn,
                tenant_id,
                document_id,
                [NewSummary(n.level, n.content, n.children, n.embedding) for n in nodes],
                llm.model,
            )
        levels: dict[str, int] = {}
        for node in nodes:
            levels[str(node.level)] = levels.get(str(node.level), 0) + 1
        return {"document_id": str(document_id), "leaves": len(leaves.contents), "levels": levels}


class SummarySearch:
    """The tenant's summary nodes nearest a query (the ``raptor`` method's other half)."""

    def __init__(self, db: Database, embedder: EmbeddingExecutor) -> None:
        self.db, self.embedder = db, embedder

    async def nearest(
        self, tenant_id: UUID, query: str, filters: MemoryFilters, limit: int
    ) -> list[summary_store.SummaryHit]:
        embedding = (await self.embedder.embed_queries([query]))[0]
        async with self.db.read(tenant_id) as conn:
            return await summary_store.nearest_summaries(conn, tenant_id, embedding, filters, limit)
