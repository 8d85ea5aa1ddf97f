"""The ranking step: the fused list's head, plus the best few of every stage, re-scored by the
ranker from every stage's evidence. What fusion put low but a stage found high still competes:
the short list is the fused top ``size`` together with each stage's top ``per_stage``."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from uuid import UUID

import numpy as np

from knowmind.linking.names import normalise_name
from knowmind.recall.base import RecallRequest, StageContext
from knowmind.recall.features import FEATURE_NAMES, HIT_STAGES, TOP_HITS, RankingInput
from knowmind.recall.features import feature_matrix as build_features
from knowmind.recall.fusion import Fused
from knowmind.recall.ranker import Ranker
from knowmind.store.candidates import CandidateFacts, candidate_facts, memory_entities
from knowmind.store.rows import ChunkHit

__all__ = ["RankStep", "RankedCandidate", "shortlist"]

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
    ) -> list[RankedCandidate]:
        """The short list in the ranker's order (ties: fused order), deleted memories left out."""
        head = shortlist(fused, rankings, max(self.size, query.k), self.per_stage)
        # the fused order needs no features, unless they are asked for (explain, training)
        featured = self.ranker.name != "rrf" or keep_features
        facts, entities = await self._facts(query, ctx, head, best_chunk, rankings, featured)
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
    ) -> tuple[dict[UUID, CandidateFacts], dict[UUID, dict[UUID, str]]]:
        embedding = await ctx.query_embedding() if featured and ctx.embedding_started() else None
        lexemes = list(ctx.query_lexemes) if featured else []
        memories = {f.key for f in head}
        for stage in HIT_STAGES:
            memories.update(m for m, _ in list(rankings.get(stage, ()))[:TOP_HITS])
        chunk_ids = [best_chunk[f.key] for f in head]

        async def read_facts() -> dict[UUID, CandidateFacts]:
            async with ctx.db.read(query.tenant) as conn:
                return await candidate_facts(conn, query.tenant, chunk_ids, embedding, lexemes)

        async def read_entities() -> dict[UUID, dict[UUID, str]]:
            if not featured:
                return {}
            async with ctx.db.read(query.tenant) as conn:
                return await memory_entities(conn, query.tenant, list(memories))

        # two sessions at once: the ranking step waits for one round trip, not two
        facts, entities = await asyncio.gather(read_facts(), read_entities())
        return facts, entities


def _share(score: float, best: float) -> float:
    return round(min(1.0, score / best), 4) if best > 0 else 0.0
