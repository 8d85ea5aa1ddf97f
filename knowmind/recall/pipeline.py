"""The recall pipeline: run the selected stages concurrently (each within a time budget), weigh
each stage by the evidence it reports for this query, fuse their memory rankings (weighted RRF by
default), rerank the short list, and return the best chunk per memory."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar
from uuid import UUID

import structlog

from knowmind.db.engine import Database
from knowmind.linking.matching import MatchedEntity, match_entities
from knowmind.models.executor import EmbeddingExecutor
from knowmind.recall.base import (
    Candidate,
    RecallRequest,
    RecallStage,
    StageContext,
    StageUnavailableError,
)
from knowmind.recall.fusion import (
    FUSION_METHODS,
    Fused,
    convex_fusion,
    reciprocal_rank_fusion,
)
from knowmind.recall.rerank import RerankStep
from knowmind.recall.weighting import (
    Calibration,
    StageWeight,
    list_signals,
    stage_weights,
)
from knowmind.recall.weighting import default_calibration as _default_calibration
from knowmind.store.rows import ChunkHit
from knowmind.store.search import fetch_chunks

__all__ = ["RecallOutcome", "RecallPipeline", "RecalledMemory"]

log = structlog.get_logger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RecalledMemory:
    chunk: ChunkHit
    score: float
    stages: dict[str, int | None]
    rerank_score: float | None = None


@dataclass(slots=True)
class RecallOutcome:
    results: list[RecalledMemory]
    timings_ms: dict[str, float]
    degraded_reasons: list[str] = field(default_factory=list)
    explain: dict[str, Any] | None = None
    # what fusion saw: each stage's memory ranking (best first, with scores) and chosen weight
    stage_rankings: dict[str, list[tuple[UUID, float]]] = field(default_factory=dict)
    stage_weights: dict[str, StageWeight] = field(default_factory=dict)
    signals: dict[str, dict[str, float]] = field(default_factory=dict)  # as reported
    # the fused score of a memory every contributing stage ranked first (scores / this: a
    # share in (0, 1]); 0 when nothing was fused
    best_score: float = 0.0

    def share(self, score: float) -> float:
        """``score`` as a share of the best possible fused score (1.0: first everywhere)."""
        return round(min(1.0, score / self.best_score), 4) if self.best_score > 0 else 0.0


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
        *,
        rrf_k: int = 60,
        stage_timeout_s: float = 5.0,
        default_weights: Mapping[str, float] | None = None,
        rerank: RerankStep | None = None,
        fusion: str = "weighted-rrf",
        calibration: Calibration | None = None,
    ) -> None:
        if fusion not in FUSION_METHODS:
            raise ValueError(f"fusion must be one of {', '.join(FUSION_METHODS)}")
        self.db = db
        self.embedder = embedder
        self.stages = {stage.name: stage for stage in stages}
        self.rrf_k = rrf_k
        self.stage_timeout_s = stage_timeout_s
        self.default_weights = dict(default_weights or {})
        self.rerank = rerank or RerankStep("none")
        self.fusion = fusion
        self.calibration = calibration

    async def recall(self, query: RecallRequest) -> RecallOutcome:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        selected = self._select(query)
        finished: dict[str, asyncio.Future[list[Candidate]]] = {
            name: asyncio.get_running_loop().create_future() for name in selected
        }
        ctx = StageContext(
            db=self.db,
            query_embedding=_once(lambda: self._embed(query.text, timings)),
            query_entities=_once(lambda: self._entities(query)),
            results_of=lambda name: _results_of(finished, name),
        )
        runs = await asyncio.gather(
            *(self._run(self.stages[n], query, ctx, finished) for n in selected)
        )
        for run in runs:
            timings[run.name] = round(run.elapsed_ms, 2)

        fuse_started = time.perf_counter()
        rankings = {run.name: _memory_ranking(run.candidates) for run in runs}
        evidence = {
            name: {**list_signals([s for _, s in ranking]), **ctx.signals.get(name, {})}
            for name, ranking in rankings.items()
        }
        chosen = self._weights(rankings, evidence, query)
        fused = self._fuse(rankings, chosen, query.fusion or self.fusion)
        best_chunk = _best_chunk_per_memory(runs)
        timings["fuse"] = _ms_since(fuse_started)

        reasons = [f"{run.name}: {run.failure}" for run in runs if run.failure]
        shortlist = fused[: max(query.k, self.rerank.candidates)]
        async with self.db.read(query.tenant) as conn:
            chunks = await fetch_chunks(conn, query.tenant, [best_chunk[f.key] for f in shortlist])
        shortlist = [f for f in shortlist if best_chunk[f.key] in chunks]  # deleted meanwhile
        rerank_started = time.perf_counter()
        order, rerank_scores, reason = await self.rerank.apply(
            query.text, [chunks[best_chunk[f.key]] for f in shortlist], query.rerank
        )
        if reason:
            reasons.append(f"rerank: {reason}")
        if rerank_scores is not None:
            timings["rerank"] = _ms_since(rerank_started)
        results = [
            RecalledMemory(
                chunk=chunks[best_chunk[shortlist[i].key]],
                score=shortlist[i].score,
                stages={name: shortlist[i].ranks.get(name) for name in self.stages},
                rerank_score=None if rerank_scores is None else rerank_scores[i],
            )
            for i in order[: query.k]
        ]
        timings["total"] = _ms_since(started)
        explain = None
        if query.explain:
            ctx.explain["fusion"] = {
                "method": query.fusion or self.fusion,
                "calibration": (self.calibration or _default_calibration()).source,
                "stages": {name: w.explain() for name, w in chosen.items()},
            }
            matched = await ctx.query_entities()
            explain = {
                "matched_entities": [
                    {
                        "id": str(m.id),
                        "name": m.name,
                        "entity_class": m.entity_class,
                        "score": round(m.score, 3),
                    }
                    for m in matched
                ],
                "seeds": ctx.explain.get("seeds", []),
                "ppr_top": ctx.explain.get("ppr_top", []),
                **{k: v for k, v in ctx.explain.items() if k not in ("seeds", "ppr_top")},
            }
        best = self._best_score(chosen, query.fusion or self.fusion)
        return RecallOutcome(results, timings, reasons, explain, rankings, chosen, evidence, best)

    def _best_score(self, chosen: Mapping[str, StageWeight], method: str) -> float:
        """What a memory ranked first by every stage with candidates would score."""
        weights = [w.weight for w in chosen.values() if w.depth > 0]
        if method == "convex":
            return 1.0 if any(w > 0 for w in weights) else 0.0
        return sum(weights) / (self.rrf_k + 1)

    def _weights(
        self,
        rankings: Mapping[str, list[tuple[UUID, float]]],
        evidence: Mapping[str, Mapping[str, float]],
        request: RecallRequest,
    ) -> dict[str, StageWeight]:
        """Per-stage weights: calibrated from the evidence (the list's own shape under the
        stage's reported signals), or fixed for "rrf"; the operator's static weights scale
        them, a request's weights replace them."""
        method = request.fusion or self.fusion
        depths = {name: len(ranking) for name, ranking in rankings.items()}
        if method == "rrf":
            fixed = {name: self.default_weights.get(name, 1.0) for name in rankings}
            fixed.update(request.weights or {})
            return stage_weights(evidence, depths, self.calibration, fixed=fixed)
        chosen = stage_weights(evidence, depths, self.calibration, fixed=request.weights)
        for name, scale in self.default_weights.items():
            if name in chosen and not (request.weights and name in request.weights):
                w = chosen[name]
                chosen[name] = StageWeight(
                    name, w.weight * scale, w.depth, w.probability,
                    f"{w.rule}; × {scale:g} (stage_weights setting)", w.signals,
                )  # fmt: skip
        return chosen

    def _fuse(
        self,
        rankings: Mapping[str, list[tuple[UUID, float]]],
        chosen: Mapping[str, StageWeight],
        method: str,
    ) -> list[Fused[UUID]]:
        weights = {name: w.weight for name, w in chosen.items()}
        if method == "convex":
            return convex_fusion({n: r[: chosen[n].depth] for n, r in rankings.items()}, weights)
        cut = {n: [m for m, _ in r[: chosen[n].depth]] for n, r in rankings.items()}
        return reciprocal_rank_fusion(cut, k=self.rrf_k, weights=weights)

    def _select(self, query: RecallRequest) -> list[str]:
        wanted = list(query.stages) if query.stages is not None else list(self.stages)
        if query.hops == 0:
            wanted = [name for name in wanted if name != "graph"]
        return [name for name in self.stages if name in wanted]

    async def _run(
        self,
        stage: RecallStage,
        query: RecallRequest,
        ctx: StageContext,
        finished: dict[str, asyncio.Future[list[Candidate]]],
    ) -> _StageRun:
        started = time.perf_counter()
        candidates: list[Candidate] = []
        failure = None
        try:
            candidates = await asyncio.wait_for(stage.search(query, ctx), self.stage_timeout_s)
        except StageUnavailableError as exc:
            failure = str(exc)
        except TimeoutError:
            failure = f"timed out after {self.stage_timeout_s:g} s"
        except Exception as exc:
            log.exception("recall.stage_failed", stage=stage.name)
            failure = f"failed: {type(exc).__name__}"
        finally:
            finished[stage.name].set_result(candidates)
        return _StageRun(stage.name, candidates, _ms_since(started), failure)

    async def _embed(self, text: str, timings: dict[str, float]) -> Any:
        started = time.perf_counter()
        vectors = await self.embedder.embed_queries([text])
        timings["embed"] = _ms_since(started)
        return vectors[0]

    async def _entities(self, query: RecallRequest) -> list[MatchedEntity]:
        # the fuzzy name search walks an index for a large tenant, sorts a small one's names
        async with self.db.read(query.tenant, custom_plans=True) as conn:
            return await match_entities(conn, query.tenant, query.text)


def _once(factory: Callable[[], Awaitable[T]]) -> Callable[[], Awaitable[T]]:
    """A zero-argument coroutine function that runs ``factory`` once and shares the result."""
    task: asyncio.Task[T] | None = None

    async def get() -> T:
        nonlocal task
        if task is None:
            task = asyncio.ensure_future(factory())
        return await asyncio.shield(task)

    return get


async def _results_of(
    finished: dict[str, asyncio.Future[list[Candidate]]], name: str
) -> list[Candidate]:
    future = finished.get(name)
    return [] if future is None else await asyncio.shield(future)


def _memory_ranking(candidates: Sequence[Candidate]) -> list[tuple[UUID, float]]:
    """The stage's memories best first, each with its best chunk's score."""
    best: dict[UUID, float] = {}
    for candidate in candidates:
        best.setdefault(candidate.memory_id, candidate.score)
    return list(best.items())


def _best_chunk_per_memory(runs: Sequence[_StageRun]) -> dict[UUID, UUID]:
    """For each memory, the chunk from the stage that ranked that memory highest."""
    best: dict[UUID, tuple[int, UUID]] = {}
    for run in runs:
        seen: set[UUID] = set()
        for candidate in run.candidates:
            if candidate.memory_id in seen:
                continue
            seen.add(candidate.memory_id)
            if len(seen) < best.get(candidate.memory_id, (10**9,))[0]:
                best[candidate.memory_id] = (len(seen), candidate.chunk_id)
    return {memory_id: chunk_id for memory_id, (_, chunk_id) in best.items()}


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
