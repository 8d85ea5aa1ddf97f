"""The full recall pipeline on a German company corpus: identity, graph hops, concurrency,
reranking and honest degradation."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

import pytest

from knowmind.recall.base import Candidate, RecallRequest
from knowmind.recall.pipeline import RecallPipeline
from knowmind.store.search import MemoryFilters
from tests.conftest import TenantAccess, make_tenant
from tests.fixtures.company_corpus import EDGES, ENTITIES, MEMORIES


@dataclass
class Corpus:
    tenant: TenantAccess
    memories: dict[str, str]
    entities: dict[str, str]


@pytest.fixture(scope="module")
async def corpus(client) -> Corpus:
    tenant = await make_tenant(client)
    entities = {}
    for name, cls, aliases in ENTITIES:
        created = await client.post(
            "/v1/entities",
            json={"name": name, "entity_class": cls, "aliases": aliases},
            headers=tenant.write,
        )
        entities[name] = created.json()["id"]
    for subject, predicate, obj in EDGES:
        linked = await client.post(
            "/v1/relations",
            json={"from_id": entities[subject], "to_id": entities[obj], "rel_type": predicate},
            headers=tenant.write,
        )
        assert linked.status_code == 200, linked.text
    memories = {}
    for memory in MEMORIES:
        body = {k: v for k, v in memory.items() if k != "key"}
        stored = await client.post("/v1/memories?wait=true", json=body, headers=tenant.write)
        assert stored.status_code == 201, stored.text
        assert stored.json()["job"]["status"] == "done"
        memories[memory["key"]] = stored.json()["id"]
    return Corpus(tenant, memories, entities)


async def ask(client, corpus: Corpus, query: str, **options) -> dict:
    response = await client.post(
        "/v1/recall", json={"query": query, **options}, headers=corpus.tenant.read
    )
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(
    "question", ["Wer ist Anna Meier?", "Who is Anna Meier?", "wer ist eigentlich a. meier"]
)
async def test_who_is_finds_the_profile_first_through_the_identity_stage(client, corpus, question):
    body = await ask(client, corpus, question, k=3, explain=True)
    top = body["results"][0]
    assert top["memory_id"] == corpus.memories["anna_profile"], body["results"]
    assert top["stages"]["identity"] == 1
    assert body["explain"]["intent"]["kind"] == "identity"


async def test_class_question_finds_the_connected_contract(client, corpus):
    body = await ask(client, corpus, "Welche Verträge haben wir mit der Bäckerei Korn?", k=3)
    identity_hits = [r["memory_id"] for r in body["results"] if r["stages"]["identity"]]
    assert corpus.memories["contract_korn"] in identity_hits


async def test_relation_phrase_finds_the_people_at_the_other_end(client, corpus):
    body = await ask(client, corpus, "Wer arbeitet für die Stadtwerke Ulm?", k=3)
    assert body["results"][0]["memory_id"] == corpus.memories["sophie_profile"]
    assert body["results"][0]["stages"]["identity"] == 1


async def test_two_hop_question_is_answered_by_the_graph_stage_only_with_hops(client, corpus):
    """The host's memory shares no content word with the question; the graph reaches it:
    Bäckerei Korn ← HOST_SERVES_CLIENT ← srv-hh-07 ← MENTIONS ← the host's memory."""
    question = "Auf welcher Maschine läuft die Software der Bäckerei Korn?"
    answer = corpus.memories["srv_hh_07"]
    stages = ["bm25", "vector", "graph"]
    # the fused order: the graph stage's own contribution, whatever the ranker makes of it
    with_hops = await ask(
        client, corpus, question, k=10, hops=2, stages=stages, explain=True, ranker="rrf"
    )
    hit = next(r for r in with_hops["results"] if r["memory_id"] == answer)
    assert hit["stages"]["graph"] is not None
    assert corpus.entities["Bäckerei Korn"] in [
        e["id"] for e in with_hops["explain"]["matched_entities"]
    ]
    without = await ask(client, corpus, question, k=10, hops=0, stages=stages, ranker="rrf")
    assert answer not in [r["memory_id"] for r in without["results"]]
    assert "graph" not in without["timings_ms"]


async def test_explain_reports_seeds_and_ppr(client, corpus):
    body = await ask(client, corpus, "Was weiß ich über das Filialportal?", explain=True)
    explain = body["explain"]
    assert corpus.entities["Filialportal"] in [e["id"] for e in explain["matched_entities"]]
    assert corpus.entities["Filialportal"] in [s["id"] for s in explain["seeds"]]
    assert explain["ppr_top"] and explain["ppr_iterations"] <= 20


async def test_weights_change_the_fusion(client, corpus):
    query = "Backups der Datenbanken"
    stages = ["bm25", "vector"]
    plain = await ask(client, corpus, query, k=5, stages=stages, ranker="rrf")
    vector_only = await ask(
        client,
        corpus,
        query,
        k=5,
        stages=stages,
        weights={"bm25": 0.0, "vector": 1.0},
        ranker="rrf",
    )
    vector_ranked = sorted(
        (r for r in vector_only["results"] if r["stages"]["vector"]),
        key=lambda r: r["stages"]["vector"],
    )
    assert [r["memory_id"] for r in vector_only["results"]] == [
        r["memory_id"] for r in vector_ranked
    ]
    assert plain["results"] != vector_only["results"]


async def test_explain_shows_the_fusion_the_signals_and_what_the_ranker_read(client, corpus):
    body = await ask(client, corpus, "Backups der Datenbanken", k=5, explain=True)
    fusion = body["explain"]["fusion"]
    assert fusion["method"] == "rrf" and fusion["rrf_k"] == 60
    assert set(fusion["weights"].values()) == {1.0}
    assert fusion["signals"]["vector"]["top1"] > 0.5 and fusion["signals"]["vector"]["margin"] >= 0
    assert body["explain"]["ranker"]["name"] == "learned" == body["ranker"]
    first = body["results"][0]
    features = first["explanation"]["features"]
    assert features["cosine"] > 0.5 and features["rrf_rank"] >= 1
    assert 0 <= first["score"] <= 1 and 0 < first["fused"] <= 1


async def test_convex_fusion_is_offered_and_an_unknown_method_is_422(client, corpus):
    convex = await ask(client, corpus, "Backups der Datenbanken", k=3, fusion="convex")
    assert convex["results"] and all(0 <= r["score"] <= 1.000001 for r in convex["results"])
    bad = await client.post(
        "/v1/recall", json={"query": "x", "fusion": "borda"}, headers=corpus.tenant.read
    )
    assert bad.status_code == 422 and bad.json()["field"] == "fusion"


async def test_rerank_requested_without_a_reranker_is_reported(client, corpus):
    body = await ask(client, corpus, "Wer ist Anna Meier?", rerank=True)
    assert body["degraded"] is True
    assert any(r.startswith("rerank: not reranked") for r in body["degraded_reasons"])
    assert all(r["rerank_score"] is None for r in body["results"])
    quiet = await ask(client, corpus, "Wer ist Anna Meier?")  # none configured, none asked
    assert quiet["degraded"] is False


async def test_unknown_stage_is_422(client, corpus):
    response = await client.post(
        "/v1/recall", json={"query": "x", "stages": ["telepathy"]}, headers=corpus.tenant.read
    )
    assert response.status_code == 422
    assert response.json()["field"].startswith("stages")
    hops = await client.post(
        "/v1/recall", json={"query": "x", "hops": 4}, headers=corpus.tenant.read
    )
    assert hops.status_code == 422 and hops.json()["field"] == "hops"


class SlowStageDouble:
    """A stage double that sleeps, then returns fixed candidates (pipeline plumbing test)."""

    def __init__(self, name: str, delay: float, candidates: list[Candidate]):
        self.name, self.delay, self.candidates = name, delay, candidates

    async def search(self, query, ctx):
        await asyncio.sleep(self.delay)
        return self.candidates


class FailingStageDouble:
    name = "identity"

    async def search(self, query, ctx):
        raise RuntimeError("boom")


async def test_stages_run_concurrently_and_failures_degrade(db, embedder, client, corpus):
    from knowmind.models.executor import EmbeddingExecutor
    from knowmind.store.search import first_chunks

    memory_ids = [uuid.UUID(corpus.memories[k]) for k in ("lunch", "car", "holiday")]
    tenant_id = uuid.UUID(corpus.tenant.id)
    async with db.tenant_tx(tenant_id) as conn:
        chunks = await first_chunks(conn, tenant_id, memory_ids, MemoryFilters())
    hits = [Candidate(chunks[m], m, 1.0) for m in memory_ids]
    stages = [
        SlowStageDouble("bm25", 0.3, hits),
        SlowStageDouble("vector", 0.3, hits[::-1]),
        SlowStageDouble("graph", 0.3, hits[1:]),
        FailingStageDouble(),
    ]
    executor = EmbeddingExecutor(embedder)
    pipeline = RecallPipeline(db, executor, stages, stage_timeout_s=2.0)
    query = RecallRequest(tenant_id=tenant_id, text="egal", candidates=10, k=3)
    started = time.perf_counter()
    outcome = await pipeline.recall(query)
    elapsed = time.perf_counter() - started
    await executor.close()
    stage_sum = sum(outcome.timings_ms[s] for s in ("bm25", "vector", "graph")) / 1000
    assert stage_sum >= 0.9
    assert elapsed < stage_sum  # concurrent: the total is below the sum of the stage times
    assert outcome.degraded_reasons == ["identity: failed: RuntimeError"]
    assert {r.chunk.memory_id for r in outcome.results} == set(memory_ids)


async def test_a_stage_over_its_budget_is_cut_off(db, embedder, client, corpus):
    from knowmind.models.executor import EmbeddingExecutor

    executor = EmbeddingExecutor(embedder)
    pipeline = RecallPipeline(
        db, executor, [SlowStageDouble("graph", 5.0, [])], stage_timeout_s=0.2
    )
    query = RecallRequest(tenant_id=uuid.UUID(corpus.tenant.id), text="egal", candidates=10, k=3)
    outcome = await pipeline.recall(query)
    await executor.close()
    assert outcome.degraded_reasons == ["graph: timed out after 0.2 s"]


async def test_the_ranking_reads_ahead_what_the_text_stages_found_and_nothing_changes(
    db, embedder, client, corpus, monkeypatch
):
    """The facts of the text stages' finds are read while a slower stage still runs; the
    ranking step reads only what that stage adds, and the features are the same as when
    everything is read at the end."""
    from knowmind.models.executor import EmbeddingExecutor
    from knowmind.recall import pipeline as pipeline_module
    from knowmind.recall import ranking
    from knowmind.recall.ranking import Reads
    from knowmind.store.search import first_chunks

    keys = ("lunch", "car", "holiday", "anna_profile", "jonas_profile")
    memory_ids = [uuid.UUID(corpus.memories[k]) for k in keys]
    tenant_id = uuid.UUID(corpus.tenant.id)
    async with db.tenant_tx(tenant_id) as conn:
        chunks = await first_chunks(conn, tenant_id, memory_ids, MemoryFilters())
    hits = [Candidate(chunks[m], m, 1.0) for m in memory_ids]
    early, late = hits[:3], hits[3:]
    stages = [
        SlowStageDouble("bm25", 0.0, early),
        SlowStageDouble("vector", 0.0, early[::-1]),
        SlowStageDouble("graph", 0.3, late),
    ]
    executor = EmbeddingExecutor(embedder)
    pipeline = RecallPipeline(db, executor, stages, stage_timeout_s=2.0)
    query = RecallRequest(tenant_id=tenant_id, text="Mittagessen", candidates=10, k=5, explain=True)
    asked: list[set[uuid.UUID]] = []
    real_facts = ranking.candidate_facts

    async def recording_facts(conn, tenant, chunk_ids, embedding, lexemes):
        asked.append(set(chunk_ids))
        return await real_facts(conn, tenant, chunk_ids, embedding, lexemes)

    monkeypatch.setattr(ranking, "candidate_facts", recording_facts)
    ahead = await pipeline.recall(query)
    assert asked == [{c.chunk_id for c in early}, {c.chunk_id for c in late}]

    async def nothing_ahead(query, ctx):  # test double: the ranking step reads everything
        return Reads()

    monkeypatch.setattr(pipeline_module, "read_ahead", nothing_ahead)
    asked.clear()
    at_the_end = await pipeline.recall(query)
    await executor.close()
    assert asked == [{c.chunk_id for c in hits}]

    def shown(outcome):
        return [
            (r.chunk.memory_id, {k: (None if v != v else v) for k, v in r.features.items()})
            for r in outcome.shortlist
        ]

    assert len(ahead.shortlist) == len(hits)
    assert shown(ahead) == shown(at_the_end)
