"""The recall pipeline: run the stages concurrently, fuse by RRF, group chunks to memories."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

import numpy as np
import structlog

from knowmind.db.engine import Database
from knowmind.models.executor import EmbeddingExecutor
from knowmind.recall.base import (
    Candidate,
    RecallQuery,
    RecallStage,
    StageContext,
    StageUnavailableError,
)
from knowmind.recall.fusion import dedupe, reciprocal_rank_fusion
from knowmind.store.rows import ChunkHit
from knowmind.store.search import fetch_chunks

__all__ = ["RecallOutcome", "RecallPipeline", "RecalledMemory"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class RecalledMemory:
    chunk: ChunkHit
    score: float
    stages: dict[str, int | None]


@dataclass(slots=True)
class RecallOutcome:
    results: list[RecalledMemory]
    timings_ms: dict[str, float]
    degraded_reasons: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _StageRun:
    name: str
    candidates: list[Candidate]
    elapsed_ms: float
    failure: str | None = None


class RecallPipeline:
    def __init__(
        self,
        db: Database,
        embedder: EmbeddingExecutor,
        stages: Sequence[RecallStage],
        rrf_k: int = 60,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.stages = {stage.name: stage for stage in stages}
        self.rrf_k = rrf_k

    async def recall(
        self, query: RecallQuery, k: int, weights: Mapping[str, float] | None = None
    ) -> RecallOutcome:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        embedding = _OnceEmbedding(self.embedder, query.text, timings)
        ctx = StageContext(db=self.db, query_embedding=embedding.get)

        runs = await asyncio.gather(*(self._run(s, query, ctx) for s in self.stages.values()))
        for run in runs:
            timings[run.name] = round(run.elapsed_ms, 2)

        fuse_started = time.perf_counter()
        rankings = {run.name: dedupe([c.memory_id for c in run.candidates]) for run in runs}
        fused = reciprocal_rank_fusion(rankings, k=self.rrf_k, weights=weights)[:k]
        best_chunk = _best_chunk_per_memory(runs, [f.key for f in fused])
        timings["fuse"] = _ms_since(fuse_started)

        async with self.db.tenant_tx(query.tenant_id) as conn:
            chunks = await fetch_chunks(conn, query.tenant_id, list(best_chunk.values()))
        results = [
            RecalledMemory(
                chunk=chunks[best_chunk[f.key]],
                score=f.score,
                stages={name: f.ranks.get(name) for name in self.stages},
            )
            for f in fused
            if best_chunk[f.key] in chunks  # deleted between search and fetch
        ]
        timings["total"] = _ms_since(started)
        reasons = [f"{run.name}: {run.failure}" for run in runs if run.failure]
        return RecallOutcome(results=results, timings_ms=timings, degraded_reasons=reasons)

    async def _run(self, stage: RecallStage, query: RecallQuery, ctx: StageContext) -> _StageRun:
        started = time.perf_counter()
        try:
            candidates = await stage.search(query, ctx)
        except StageUnavailableError as exc:
            return _StageRun(stage.name, [], _ms_since(started), str(exc))
        except Exception as exc:
            log.exception("recall.stage_failed", stage=stage.name)
            return _StageRun(stage.name, [], _ms_since(started), f"failed: {type(exc).__name__}")
        return _StageRun(stage.name, candidates, _ms_since(started))


class _OnceEmbedding:
    """Embeds the query at most once per recall, however many stages ask for it."""

    def __init__(self, embedder: EmbeddingExecutor, text: str, timings: dict[str, float]):
        self._embedder, self._text, self._timings = embedder, text, timings
        self._task: asyncio.Task[np.ndarray] | None = None

    async def get(self) -> np.ndarray:
        if self._task is None:
            self._task = asyncio.ensure_future(self._embed())
        return await asyncio.shield(self._task)

    async def _embed(self) -> np.ndarray:
        started = time.perf_counter()
        vectors = await self._embedder.embed_queries([self._text])
        self._timings["embed"] = _ms_since(started)
        return vectors[0]


def _best_chunk_per_memory(runs: Sequence[_StageRun], memory_ids: list[UUID]) -> dict[UUID, UUID]:
    """For each memory, the chunk from the stage that ranked that memory highest."""
    wanted = set(memory_ids)
    best: dict[UUID, tuple[int, UUID]] = {}
    for run in runs:
        seen: set[UUID] = set()
        for candidate in run.candidates:
            if candidate.memory_id in seen:
                continue
            seen.add(candidate.memory_id)
            rank = len(seen)
            if candidate.memory_id in wanted and rank < best.get(candidate.memory_id, (10**9,))[0]:
                best[candidate.memory_id] = (rank, candidate.chunk_id)
    return {memory_id: chunk_id for memory_id, (_, chunk_id) in best.items()}


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
