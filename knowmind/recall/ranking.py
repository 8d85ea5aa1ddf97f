"""The ranking step: the fused list's head, plus the best few of every stage, re-scored by the
ranker from every stage's evidence. What fusion put low but a stage found high still competes:
the short list is the fused top ``size`` together with each stage's top ``per_stage``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from uuid import UUID

import numpy as np
import structlog

from knowmind.linking.names import normalise_name
from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.recall.features import FEATURE_NAMES, HIT_STAGES, TOP_HITS, RankingInput
from knowmind.recall.features import feature_matrix as build_features
from knowmind.recall.fusion import Fused, reciprocal_rank_fusion
from knowmind.recall.ranker import Ranker
from knowmind.store.candidates import CandidateFacts, candidate_facts, memory_entities
from knowmind.store.rows import ChunkHit

__all__ = [
    "RankStep",
    "RankedCandidate",
    "Reads",
    "best_chunk_per_memory",
    "memory_ranking",
    "read_ahead",
    "shortlist",
]

log = structlog.get_logger(__name__)

SHORTLIST = 50
PER_STAGE = 10


@dataclass(frozen=True, slots=True)
class RankedCandidate:
    chunk: ChunkHit
    fused: Fused[UUID]
    fused_share: float  # the fused score as a share of the best possible (0–1)
    raw: float  # the ranker's score (orders the list)
    probability: float  # what the doors show as ``score``
    features: dict[str, float] | None = None  # when asked for (explain, training)


def shortlist(
    fused: Sequence[Fused[UUID]],
    rankings: Mapping[str, Sequence[tuple[UUID, float]]],
    size: int = SHORTLIST,
    per_stage: int = PER_STAGE,
) -> list[Fused[UUID]]:
    """The fused top ``size`` plus every stage's top ``per_stage``, in fused order."""
    wanted = {f.key for f in fused[:size]}
    for ranking in rankings.values():
        wanted.update(memory for memory, _ in ranking[:per_stage])
    return [f for f in fused if f.key in wanted]


class RankStep:
    def __init__(self, ranker: Ranker, size: int = SHORTLIST, per_stage: int = PER_STAGE):
        self.ranker = ranker
        self.size = size
        self.per_stage = per_stage

    async def rank(
        self,
        query: RecallRequest,
        ctx: StageContext,
        fused: Sequence[Fused[UUID]],
        rankings: Mapping[str, Sequence[tuple[UUID, float]]],
        best_chunk: Mapping[UUID, UUID],
        best_score: float,
        *,
        keep_features: bool = False,
        early: Reads | None = None,
    ) -> list[RankedCandidate]:
        """The short list in the ranker's order (ties: fused order), deleted memories left out."""
        head = shortlist(fused, rankings, max(self.size, query.k), self.per_stage)
        # the fused order needs no features, unless they are asked for (explain, training)
        featured = self.ranker.name != "rrf" or keep_features
        reads = await self._facts(query, ctx, head, best_chunk, rankings, featured, early)
        facts, entities = reads.facts, reads.entities
        head = [f for f in head if best_chunk[f.key] in facts]
        shares = np.array([_share(f.score, best_score) for f in head], dtype=np.float64)
        features = np.zeros((len(head), len(FEATURE_NAMES)))
        if featured and head:
            named = await ctx.query_entities()
            features = build_features(
                RankingInput(
                    memories=[f.key for f in head],
                    chunks=best_chunk,
                    rankings=rankings,
                    rrf={f.key: f.score for f in head},
                    facts=facts,
                    signals=ctx.signals,
                    evidence=ctx.evidence,
                    query_lexemes=ctx.query_lexemes,
                    query_entities={e.id: e.name for e in named},
                    memory_entities=entities,
                    question_language=ctx.question_language,
                    question_words=frozenset(normalise_name(query.text).split()),
                    question_text=query.text,
                    window=ctx.time_window,
                    asks_when=ctx.asks_when,
                )
            )
        for name in query.ignore_features:
            features[:, FEATURE_NAMES.index(name)] = np.nan
        scored = self.ranker.rank(features, shares)
        order = sorted(range(len(head)), key=lambda i: (-scored.raw[i], i))
        return [
            RankedCandidate(
                chunk=facts[best_chunk[head[i].key]].chunk,
                fused=head[i],
                fused_share=float(shares[i]),
                raw=float(scored.raw[i]),
                probability=float(scored.probability[i]),
                features=dict(zip(FEATURE_NAMES, features[i].tolist(), strict=True))
                if keep_features
                else None,
            )
            for i in order
        ]

    async def _facts(
        self,
        query: RecallRequest,
        ctx: StageContext,
        head: Sequence[Fused[UUID]],
        best_chunk: Mapping[UUID, UUID],
        rankings: Mapping[str, Sequence[tuple[UUID, float]]],
        featured: bool,
        early: Reads | None,
    ) -> Reads:
        """What the features need, less what was read ahead."""
        early = early or Reads()
        memories = _featured_memories(head, rankings) if featured else set()
        missing = await _read(
            query,
            ctx,
            [c for c in (best_chunk[f.key] for f in head) if c not in early.facts],
            [m for m in memories if m not in early.entities],
            featured=featured,
        )
        return Reads({**early.facts, **missing.facts}, {**early.entities, **missing.entities})


@dataclass(frozen=True, slots=True)
class Reads:
    """The short list's facts (by chunk id) and the entities of its memories (by memory id)."""

    facts: dict[UUID, CandidateFacts] = field(default_factory=dict)
    entities: dict[UUID, dict[UUID, str]] = field(default_factory=dict)


async def read_ahead(query: RecallRequest, ctx: StageContext) -> Reads:
    """The ranking step's reads for what the text stages found, started as soon as they finish:
    the graph stage waits for their hits and runs on after them, so these reads leave the
    recall's critical path; the ranking step reads only what the later stages add. Never
    fails: what it could not read is read again by the ranking step."""
    found = [await ctx.results_of(stage) for stage in HIT_STAGES]
    rankings = {s: memory_ranking(c) for s, c in zip(HIT_STAGES, found, strict=True)}
    fused = reciprocal_rank_fusion({s: [m for m, _ in r] for s, r in rankings.items()})
    head = shortlist(fused, rankings, max(SHORTLIST, query.k), PER_STAGE)
    best_chunk = best_chunk_per_memory(found)
    try:
        return await _read(
            query,
            ctx,
            [best_chunk[f.key] for f in head],
            list(_featured_memories(head, rankings)),
            featured=True,
        )
    except Exception:  # the ranking step reads what is missing, and reports what fails
        log.warning("recall.read_ahead_failed", exc_info=True)
        return Reads()


def best_chunk_per_memory(runs: Sequence[Sequence[Candidate]]) -> dict[UUID, UUID]:
    """For each memory, the chunk from the stage that ranked that memory highest."""
    best: dict[UUID, tuple[int, UUID]] = {}
    for candidates in runs:
        seen: set[UUID] = set()
        for candidate in candidates:
            if candidate.memory_id in seen:
                continue
            seen.add(candidate.memory_id)
            if len(seen) < best.get(candidate.memory_id, (10**9,))[0]:
                best[candidate.memory_id] = (len(seen), candidate.chunk_id)
    return {memory_id: chunk_id for memory_id, (_, chunk_id) in best.items()}


def memory_ranking(candidates: Sequence[Candidate]) -> list[tuple[UUID, float]]:
    """A stage's memories best first, each with its best chunk's score."""
    best: dict[UUID, float] = {}
    for candidate in candidates:
        best.setdefault(candidate.memory_id, candidate.score)
    return list(best.items())


def _featured_memories(
    head: Sequence[Fused[UUID]], rankings: Mapping[str, Sequence[tuple[UUID, float]]]
) -> set[UUID]:
    """The memories whose entities the features read: the short list and the first hits."""
    memories = {f.key for f in head}
    for stage in HIT_STAGES:
        memories.update(m for m, _ in list(rankings.get(stage, ()))[:TOP_HITS])
    return memories


async def _read(
    query: RecallRequest,
    ctx: StageContext,
    chunk_ids: list[UUID],
    memories: list[UUID],
    *,
    featured: bool,
) -> Reads:
    """The chunks' facts and the memories' entities, on one session (a second one would cost
    the database more than the round trip it saves); without features, only which chunks
    still exist."""
    if not chunk_ids and not memories:
        return Reads()
    embedding = await ctx.query_embedding() if featured and ctx.embedding_started() else None
    lexemes = list(ctx.query_lexemes) if featured else []
    async with ctx.db.read(query.tenant) as conn:
        facts = await candidate_facts(conn, query.tenant, chunk_ids, embedding, lexemes)
        entities = await memory_entities(conn, query.tenant, memories) if memories else {}
    return Reads(facts, entities)


def _share(score: float, best: float) -> float:
    return round(min(1.0, score / best), 4) if best > 0 else 0.0
