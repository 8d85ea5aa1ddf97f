"""Graph stage: Personalized PageRank around the entities the question and the first hits name.

Seeds are the entities mentioned by the top full-text and vector hits (weighted by the rank of the
hit, 1/rank) and the entities matched in the question itself (weight 1). PPR runs over the
subgraph within ``hops`` of the seeds, on the configured backend's read of the graph; memories
are ranked by the mass they receive.

Bounded work: the question's entities are matched at once, while the stage waits for the text
stages' hits at most ``hit_wait_s`` (hits that come later are not used: explain lists what
seeded the walk); at most ``max_seeds`` seeds; the reader caps the subgraph; PPR stops after
``max_iterations``.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from uuid import UUID

from knowmind.db.tenant_scope import user_of
from knowmind.graph.base import GraphReader, Walk
from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.store.edges import mentioned_entities
from knowmind.store.search import first_chunks

__all__ = ["GraphStage"]

SEED_HITS = 5  # top hits per text stage whose entities seed the walk
# Share of the reset mass for entities the question names (the rest goes to the entities of
# the first hits): what the user asked about outweighs what the text stages happened to find.
QUESTION_SHARE = 0.8
HIT_SEED_WEIGHT = 1.0
HIT_STAGES = ("bm25", "vector")
DEFAULT_HIT_WAIT_S = 0.15


class GraphStage:
    name = "graph"

    def __init__(
        self,
        reader: GraphReader,
        damping: float = 0.85,
        max_iterations: int = 20,
        *,
        hit_wait_s: float = DEFAULT_HIT_WAIT_S,
        max_seeds: int = 30,
    ):
        self.reader = reader
        self.damping = damping
        self.max_iterations = max_iterations
        self.hit_wait_s = hit_wait_s
        self.max_seeds = max_seeds

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        seeds, hits = await self._seeds(query, ctx)
        named = await ctx.query_entities()
        evidence = {
            "named_entities": float(len(named)),
            "entity_score": max((e.score for e in named), default=0.0),
            "seeds": float(len(seeds)),
            "linked": 0.0,
        }
        ctx.signals["graph"] = evidence
        if not seeds:
            ctx.explain["seeds"] = []
            return []
        result = await self.reader.personalized_pagerank(
            Walk(query.tenant, seeds, query.hops, self.damping, self.max_iterations)
        )
        # memories the walk reached through links rather than as a text hit
        evidence["linked"] = float(len(result.memories - hits))
        # memories are the linked memory nodes, and the hits that seeded the walk (a hit with no
        # links keeps its reset mass: it must not lose its place to a linked stranger)
        memories = result.memories | hits
        ranked = sorted(  # ties by id: every replica answers alike
            (node for node in result.scores if node in memories),
            key=lambda n: (-result.scores[n], str(n)),
        )[: query.candidates]
        async with ctx.db.read(query.tenant) as conn:
            chunks = await first_chunks(conn, query.tenant, ranked, query.filters)
        if query.explain:
            top = sorted(result.scores.items(), key=lambda kv: -kv[1])[:10]
            if user_of(query.tenant) is not None:  # a mirror's walk: no unseen memory shown
                top = [(n, s) for n, s in top if n not in result.memories or n in chunks]
            ctx.explain["seeds"] = [{"id": str(s), "weight": round(w, 4)} for s, w in seeds.items()]
            ctx.explain["ppr_top"] = [
                {"id": str(n), "score": round(s, 5), "memory": n in result.memories} for n, s in top
            ]
            ctx.explain["ppr_iterations"] = result.iterations
            ctx.explain["ppr_method"] = f"{self.reader.name}/{result.method}"
        return [Candidate(chunks[m], m, result.scores[m]) for m in ranked if m in chunks]

    async def _hits_in_time(self, ctx: StageContext) -> dict[str, list[Candidate]]:
        """The text stages' candidates that arrive within ``hit_wait_s``, by stage."""
        waits = {stage: asyncio.ensure_future(ctx.results_of(stage)) for stage in HIT_STAGES}
        await asyncio.wait(waits.values(), timeout=self.hit_wait_s)
        arrived = {}
        for stage, wait in waits.items():
            if wait.done():
                arrived[stage] = wait.result()
            else:
                wait.cancel()  # results_of shields the stage itself: only the wait ends
        return arrived

    async def _seeds(
        self, query: RecallRequest, ctx: StageContext
    ) -> tuple[dict[UUID, float], set[UUID]]:
        """(reset weights per node, the hit memories among them)."""
        entities = asyncio.ensure_future(ctx.query_entities())
        arrived = await self._hits_in_time(ctx)
        named: dict[UUID, float] = defaultdict(float)
        for entity in await entities:
            named[entity.id] += entity.score
        if query.explain:
            ctx.explain["graph_hits_used"] = sorted(arrived)
            ctx.explain["graph_hits_late"] = sorted(set(HIT_STAGES) - set(arrived))
        found: dict[UUID, float] = defaultdict(float)
        hit_rank: dict[UUID, int] = {}
        for candidates in arrived.values():
            seen: list[UUID] = []
            for candidate in candidates:
                if candidate.memory_id not in seen:
                    seen.append(candidate.memory_id)
            for rank, memory_id in enumerate(seen[:SEED_HITS], start=1):
                hit_rank[memory_id] = min(rank, hit_rank.get(memory_id, rank))
        if hit_rank:
            async with ctx.db.read(query.tenant) as conn:
                pairs = await mentioned_entities(conn, query.tenant, list(hit_rank))
            for memory_id, entity_id in pairs:
                found[entity_id] += 1.0 / hit_rank[memory_id]
            # the hits themselves seed the walk too (HippoRAG 2 seeds passages as well): the
            # graph then ranks what the text stages found, expanded by their neighbourhood
            for memory_id, rank in hit_rank.items():
                found[memory_id] += HIT_SEED_WEIGHT / rank
        hits = set(hit_rank)
        if not named or not found:
            return self._strongest(dict(named or found)), hits
        seeds: dict[UUID, float] = defaultdict(float)
        for share, weights in ((QUESTION_SHARE, named), (1 - QUESTION_SHARE, found)):
            total = sum(weights.values())
            for entity_id, weight in weights.items():
                seeds[entity_id] += share * weight / total
        return self._strongest(dict(seeds)), hits

    def _strongest(self, seeds: dict[UUID, float]) -> dict[UUID, float]:
        """At most ``max_seeds`` seeds, the heaviest (ties by id, so the choice is stable)."""
        if len(seeds) <= self.max_seeds:
            return seeds
        kept = sorted(seeds, key=lambda node: (-seeds[node], str(node)))[: self.max_seeds]
        return {node: seeds[node] for node in kept}
