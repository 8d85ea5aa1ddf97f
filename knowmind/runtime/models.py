"""The models subsystem: the embedding executor (the one model thread of the process), the
reranker beside it, their warm-up, and the language model (or why there is none)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from knowmind.db.migrate import check_embedding_model
from knowmind.models.base import Embedder
from knowmind.models.executor import EmbeddingExecutor
from knowmind.models.factory import build_embedder, build_query_embedder
from knowmind.models.llm import LLM
from knowmind.models.llm_factory import build_llm
from knowmind.recall.rerank import RerankStep
from knowmind.services.health import WarmUp
from knowmind.settings import LLMSetup, Settings, SettingsError

__all__ = ["ModelParts", "build_models"]


@dataclass(frozen=True, slots=True)
class ModelParts:
    """The loaded models: the embedder, the rerank step, the language model (or why not)."""

    embedder: EmbeddingExecutor
    rerank: RerankStep
    warmup: WarmUp
    threads: int  # of each model (the reranker is loaded with as many)
    llm: LLM | None  # None: ``llm_problem`` says why
    llm_problem: str | None
    llm_setup: LLMSetup

    async def close(self) -> None:
        if self.llm is not None:
            await self.llm.close()
        await self.embedder.close()


async def build_models(
    settings: Settings, embedder: Embedder | None, query_embedder: Embedder | None
) -> ModelParts:
    """The models, the embedder checked against the one the database was built with.
    ``embedder``: one loaded already (then ``query_embedder`` too, when wanted); else both
    are loaded here, off the event loop."""
    models = settings.models
    if embedder is None:
        threads = models.embedder_threads
        embedder = await asyncio.to_thread(build_embedder, models.embedder, threads)
        query_embedder = await asyncio.to_thread(
            build_query_embedder, models.embedder, threads, models.separate_query_model
        )
    assert settings.database.database_url, "the database URL is set before the runtime starts"
    await check_embedding_model(settings.database.database_url, embedder.model_id, embedder.dim)
    llm, problem = build_llm(models.llm_setup)
    if llm is None and "llm" in settings.ingest.extractor_list:
        raise SettingsError(f"KNOWMIND_EXTRACTORS=llm needs a language model: {problem}")
    executor = EmbeddingExecutor(
        embedder,
        max_owner_texts=models.embed_queue_per_tenant,
        max_queued_texts=models.embed_queue_total,
        query_embedder=query_embedder,
    )
    rerank = RerankStep(
        models.reranker,
        models.rerank_candidates,
        models.rerank_timeout_seconds,
        thread=executor.model_thread,
    )
    return ModelParts(
        executor,
        rerank,
        WarmUp(executor, rerank),
        models.embedder_threads,
        llm,
        problem,
        models.llm_setup,
    )
