"""The recall pipeline: run the selected stages concurrently (each within a time budget), fuse
their memory rankings (Reciprocal Rank Fusion, k = 60), re-score the short list with the ranker
over every stage's evidence (``recall.ranking``), rerank its head with a cross-encoder when one
is active, and return the best chunk per memory with a score a user can read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
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
from knowmind.recall.ranker import Ranker, RankerUnavailableError, build_ranker
from knowmind.recall.ranking import (
    RankedCandidate,
    RankStep,
    Reads,
    best_chunk_per_memory,
    memory_ranking,
    read_ahead,
)
from knowmind.recall.rerank import RerankStep
from knowmind.recall.timeframe import asks_when, resolve_window
from knowmind.store.rows import ChunkHit

__all__ = ["RecallOutcome", "RecallPipeline", "RecalledMemory"]

log = structlog.get_logger(__name__)
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RecalledMemory:
    chunk: ChunkHit
    score: float  # the ranker's probability that the memory answers the question (0–1)
    stages: dict[str, int | None]
    rerank_score: float | None = None
    fused: float = 0.0  # the fused (RRF) score as a share of the best possible
    ranker_score: float = 0.0  # the ranker's raw score (orders the results)
    features: dict[str, float] | None = None  # with explain: what the ranker read


@dataclass(slots=True)
class RecallOutcome:
    results: list[RecalledMemory]
    timings_ms: dict[str, float]
    degraded_reasons: list[str] = field(default_factory=list)
    explain: dict[str, Any] | None = None
    # what fusion saw: each stage's memory ranking (best first, with scores)
    stage_rankings: dict[str, list[tuple[UUID, float]]] = field(default_factory=dict)
    signals: dict[str, dict[str, float]] = field(default_factory=dict)  # as the stages reported
    ranker: str = "rrf"  # the ranker that ordered the results
    # with explain: the whole short list the ranker scored, in its order (before ``k``)
    shortlist: list[RecalledMemory] = field(default_factory=list)


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
        fusion: str = "rrf",
        ranker: str = "learned",
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
        self.ranker_name = ranker
        self.ranker_reason: str | None = None  # why the configured ranker cannot run
        self._rankers: dict[str, Ranker] = {}
        try:
            self._rankers[ranker] = build_ranker(ranker)
        except RankerUnavailableError as exc:
            self.ranker_reason = str(exc)
        self._rankers.setdefault("rrf", build_ranker("rrf"))

    def ranker_for(self, requested: str | None) -> tuple[Ranker, str | None]:
        """The ranker a request gets, and why it is not the one it asked for (or configured)."""
        name = requested or self.ranker_name
        if name not in self._rankers:
            try:
                self._rankers[name] = build_ranker(name)
            except RankerUnavailableError as exc:
                return self._rankers["rrf"], f"ranker {name}: {exc}; fused order kept"
        return self._rankers[name], None

    async def recall(self, query: RecallRequest) -> RecallOutcome:
        started = time.perf_counter()
        timings: dict[str, float] = {}
        selected = self._select(query)
        finished: dict[str, asyncio.Future[list[Candidate]]] = {
            name: asyncio.get_running_loop().create_future() for name in selected
        }
        embedding = _Once(lambda: self._embed(query.text, timings))
        reference = query.reference_time or query.filters.as_of or datetime.now(UTC)
        ctx = StageContext(
            db=self.db,
            query_embedding=embedding,
            query_entities=_Once(lambda: self._entities(query)),
            results_of=lambda name: _results_of(finished, name),
            embedding_started=lambda: embedding.started,
            time_window=resolve_window(query.text, _aware(reference)),
            asks_when=asks_when(query.text),
        )
        ranker, ranker_reason = self.ranker_for(query.ranker)
        # the fused order needs no features, unless they are asked for (explain, training)
        featured = ranker.name != "rrf" or query.explain
        early = asyncio.ensure_future(read_ahead(query, ctx)) if featured else None
        runs = await self._run_all(query, ctx, selected, finished, early)
        for run in runs:
            timings[run.name] = round(run.elapsed_ms, 2)

        fuse_started = time.perf_counter()
        rankings = {run.name: memory_ranking(run.candidates) for run in runs}
        weights = self._weights(rankings, query)
        fused = self._fuse(rankings, weights, query.fusion or self.fusion)
        timings["fuse"] = _ms_since(fuse_started)

        reasons = [f"{run.name}: {run.failure}" for run in runs if run.failure]
        if ranker_reason:
            reasons.append(ranker_reason)
        rank_started = time.perf_counter()
        ranked = await RankStep(ranker).rank(
            query,
            ctx,
            fused,
            rankings,
            best_chunk_per_memory([run.candidates for run in runs]),
            self._best_score(rankings, weights, query.fusion or self.fusion),
            keep_features=query.explain,
            early=None if early is None else await early,
        )
        timings["rank"] = _ms_since(rank_started)
        results, rerank_reason = await self._rerank(query, ranked, timings)
        shortlist = [_recalled(r, self.stages) for r in ranked] if query.explain else []
        if rerank_reason:
            reasons.append(f"rerank: {rerank_reason}")
        timings["total"] = _ms_since(started)
        explain = await self._explain(query, ctx, weights, ranker) if query.explain else None
        return RecallOutcome(
            results, timings, reasons, explain, rankings, ctx.signals, ranker.name, shortlist
        )

    async def _rerank(
        self, query: RecallRequest, ranked: list[RankedCandidate], timings: dict[str, float]
    ) -> tuple[list[RecalledMemory], str | None]:
        """The cross-encoder's order of the ranker's head (when one is active), cut to ``k``
        after dropping what scores below ``min_score``."""
        rerank_started = time.perf_counter()
        order, rerank_scores, reason = await self.rerank.apply(
            query.text, [r.chunk for r in ranked], query.rerank
        )
        if rerank_scores is not None:
            timings["rerank"] = _ms_since(rerank_started)
        results = [
            _recalled(ranked[i], self.stages, None if rerank_scores is None else rerank_scores[i])
            for i in order
            if ranked[i].probability >= query.min_score
        ]
        return results[: query.k], reason

    async def _explain(
        self,
        query: RecallRequest,
        ctx: StageContext,
        weights: Mapping[str, float],
        ranker: Ranker,
    ) -> dict[str, Any]:
        ctx.explain["fusion"] = {
            "method": query.fusion or self.fusion,
            "rrf_k": self.rrf_k,
            "weights": dict(weights),
            "signals": ctx.signals,
        }
        ctx.explain["ranker"] = {"name": ranker.name, "description": ranker.description}
        matched = await ctx.query_entities()
        return {
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

    def _best_score(
        self,
        rankings: Mapping[str, list[tuple[UUID, float]]],
        weights: Mapping[str, float],
        method: str,
    ) -> float:
        """What a memory ranked first by every stage with candidates would score."""
        found = [weights[name] for name, ranking in rankings.items() if ranking]
        if method == "convex":
            return 1.0 if any(w > 0 for w in found) else 0.0
        return sum(found) / (self.rrf_k + 1)

    def _weights(
        self, rankings: Mapping[str, list[tuple[UUID, float]]], request: RecallRequest
    ) -> dict[str, float]:
        """Each stage's fusion weight: 1, or the operator's ``stage_weights`` setting, or what
        the request asks for."""
        weights = {name: self.default_weights.get(name, 1.0) for name in rankings}
        weights.update({k: v for k, v in (request.weights or {}).items() if k in rankings})
        return weights

    def _fuse(
        self,
        rankings: Mapping[str, list[tuple[UUID, float]]],
        weights: Mapping[str, float],
        method: str,
    ) -> list[Fused[UUID]]:
        if method == "convex":
            return convex_fusion(rankings, weights)
        lists = {name: [m for m, _ in ranking] for name, ranking in rankings.items()}
        return reciprocal_rank_fusion(lists, k=self.rrf_k, weights=weights)

    def _select(self, query: RecallRequest) -> list[str]:
        wanted = list(query.stages) if query.stages is not None else list(self.stages)
        if query.hops == 0:
            wanted = [name for name in wanted if name != "graph"]
        return [name for name in self.stages if name in wanted]

    async def _run_all(
        self,
        query: RecallRequest,
        ctx: StageContext,
        selected: Sequence[str],
        finished: dict[str, asyncio.Future[list[Candidate]]],
        early: asyncio.Future[Reads] | None,
    ) -> list[_StageRun]:
        """Every selected stage at once; a cancelled recall stops the reads ahead too."""
        try:
            return await asyncio.gather(
                *(self._run(self.stages[n], query, ctx, finished) for n in selected)
            )
        except BaseException:
            if early is not None:
                early.cancel()
            raise

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


class _Once(Generic[T]):
    """A zero-argument coroutine function that runs ``factory`` once and shares the result;
    ``started`` says whether anyone asked yet."""

    def __init__(self, factory: Callable[[], Awaitable[T]]) -> None:
        self._factory = factory
        self._task: asyncio.Task[T] | None = None

    @property
    def started(self) -> bool:
        return self._task is not None

    async def __call__(self) -> T:
        if self._task is None:
            self._task = asyncio.ensure_future(self._factory())
        return await asyncio.shield(self._task)


async def _results_of(
    finished: dict[str, asyncio.Future[list[Candidate]]], name: str
) -> list[Candidate]:
    future = finished.get(name)
    return [] if future is None else await asyncio.shield(future)


def _recalled(
    ranked: RankedCandidate, stages: Mapping[str, object], rerank_score: float | None = None
) -> RecalledMemory:
    return RecalledMemory(
        chunk=ranked.chunk,
        score=round(ranked.probability, 4),
        stages={name: ranked.fused.ranks.get(name) for name in stages},
        rerank_score=rerank_score,
        fused=ranked.fused_share,
        ranker_score=ranked.raw,
        features=ranked.features,
    )


def _aware(moment: datetime) -> datetime:
    """A time without a zone is UTC (as every door reads one)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
