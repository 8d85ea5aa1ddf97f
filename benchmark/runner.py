"""Quality benchmark: every system on every dataset, in one run, through the real services."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from statistics import quantiles
from typing import Any
from uuid import UUID

from sqlalchemy import text
from tqdm import tqdm

from benchmark.datasets import Dataset
from benchmark.metrics import aggregate, per_query
from knowmind.ingest.pipeline import passage_text
from knowmind.recall.base import RecallRequest
from knowmind.recall.registry import STAGE_NAMES
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.memories import MemoryDraft

__all__ = ["PIPELINE_SYSTEMS", "SystemResult", "evaluate_dataset"]

ALL_STAGES = STAGE_NAMES
# name -> the stages it runs (None: all). "filename" and the peers are not pipelines.
PIPELINE_SYSTEMS: dict[str, tuple[str, ...] | None] = {
    "fulltext": ("bm25",),
    "vector": ("vector",),
    "hybrid": ("bm25", "vector"),
    "knowmind": None,
    **{f"knowmind-no-{s}": tuple(x for x in ALL_STAGES if x != s) for s in ALL_STAGES},
}
INGEST_CONCURRENCY = 8
K = 10


@dataclass(slots=True)
class SystemResult:
    system: str
    metrics: dict[str, float]
    latency_ms: dict[str, dict[str, float]]
    per_query: dict[str, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    if len(values) == 1:
        return {"p50": round(values[0], 2), "p95": round(values[0], 2)}
    cuts = quantiles(values, n=20, method="inclusive")
    return {"p50": round(cuts[9], 2), "p95": round(cuts[18], 2)}


async def ingest(runtime: Runtime, who: Principal, dataset: Dataset) -> dict[str, float]:
    """Titles become entities when the dataset says so (the graph for multi-hop questions:
    extraction links passages that mention another passage's title); then every document is
    remembered through the memory service, and extraction is awaited."""
    started = time.perf_counter()
    if dataset.titles_as_entities:
        for title in tqdm(sorted({d.title for d in dataset.docs}), desc="entities", leave=False):
            await runtime.graph.upsert_entity(who, title, "Topic")
    semaphore = asyncio.Semaphore(INGEST_CONCURRENCY)
    bar = tqdm(total=len(dataset.docs), desc=f"ingest {dataset.name}", leave=False)

    async def one(doc: Any) -> None:
        async with semaphore:
            draft = MemoryDraft(
                content=doc.text, title=doc.title, source=doc.id, memory_type="reference"
            )
            await runtime.memories.remember(who, draft)
            bar.update()

    await asyncio.gather(*(one(d) for d in dataset.docs))
    bar.close()
    remembered = time.perf_counter() - started
    while (await runtime.health.stats(who))["pending_jobs"]:
        await asyncio.sleep(0.2)
    return {
        "documents": len(dataset.docs),
        "ingest_s": round(remembered, 2),
        "extraction_done_s": round(time.perf_counter() - started, 2),
        "docs_per_s": round(len(dataset.docs) / remembered, 2),
    }


async def run_pipeline_system(
    runtime: Runtime, who: Principal, dataset: Dataset, name: str, stages: tuple[str, ...] | None
) -> SystemResult:
    rows, per_q, notes = [], {}, set()
    stage_times: dict[str, list[float]] = {}
    for query in tqdm(dataset.queries, desc=f"{dataset.name}/{name}", leave=False):
        # baselines are plain rankings; knowmind systems rerank when a reranker is active
        rerank = None if name.startswith("knowmind") else False
        request = RecallRequest(text=query.text, k=K, stages=stages, rerank=rerank, hops=2)
        outcome = await runtime.recall.recall(who, request)
        ranking = [r.chunk.source or "" for r in outcome.results]
        scores = per_query(ranking, dataset.qrels[query.id])
        rows.append(scores)
        per_q[query.id] = {"ranking": ranking, **scores}
        notes.update(outcome.degraded_reasons)
        for stage, ms in outcome.timings_ms.items():
            stage_times.setdefault(stage, []).append(ms)
    latency = {stage: percentiles(values) for stage, values in stage_times.items()}
    return SystemResult(name, aggregate(rows), latency, per_q, sorted(notes))


async def run_filename_system(runtime: Runtime, who: Principal, dataset: Dataset) -> SystemResult:
    """Title match only: pg_trgm similarity between the question and memory titles."""
    assert who.tenant_id is not None
    rows, per_q, times = [], {}, []
    for query in tqdm(dataset.queries, desc=f"{dataset.name}/filename", leave=False):
        started = time.perf_counter()
        async with runtime.db.tenant_tx(who.tenant_id) as conn:
            found = await conn.execute(
                text(
                    "SELECT source FROM memories WHERE tenant_id = :t ORDER BY "
                    "greatest(similarity(lower(title), lower(:q)), "
                    "word_similarity(lower(title), lower(:q))) DESC, id LIMIT :k"
                ),
                {"t": who.tenant_id, "q": query.text, "k": K},
            )
            ranking = [r[0] for r in found]
        times.append((time.perf_counter() - started) * 1000)
        scores = per_query(ranking, dataset.qrels[query.id])
        rows.append(scores)
        per_q[query.id] = {"ranking": ranking, **scores}
    return SystemResult("filename", aggregate(rows), {"total": percentiles(times)}, per_q)


async def run_peer(peer: Any, runtime: Runtime, dataset: Dataset, name: str) -> SystemResult:
    """A peer system on the same texts and the same vectors (from the embedding cache)."""
    from benchmark.peers import PeerDoc

    embedder = runtime.embedder
    passages = [passage_text(d.title, d.text) for d in dataset.docs]
    vectors = await embedder.embed_passages(passages)
    await asyncio.to_thread(
        peer.index,
        [PeerDoc(d.id, d.title, d.text) for d in dataset.docs],
        vectors,
        dataset.language,
    )
    rows, per_q, times = [], {}, []
    for query in tqdm(dataset.queries, desc=f"{dataset.name}/{name}", leave=False):
        vector = (await embedder.embed_queries([query.text]))[0]
        started = time.perf_counter()
        ranking = await asyncio.to_thread(peer.search, query.text, vector, K)
        times.append((time.perf_counter() - started) * 1000)
        scores = per_query(ranking, dataset.qrels[query.id])
        rows.append(scores)
        per_q[query.id] = {"ranking": ranking, **scores}
    return SystemResult(name, aggregate(rows), {"search": percentiles(times)}, per_q)


async def evaluate_dataset(
    runtime: Runtime, dataset: Dataset, systems: list[str], peers: dict[str, Any]
) -> dict[str, Any]:
    tenant = await runtime.admin.create_tenant(
        f"bench-{dataset.name}-{time.time_ns()}", dataset.language
    )
    who = Principal(UUID(str(tenant.id)), frozenset({"write"}), language=dataset.language)
    ingest_stats = await ingest(runtime, who, dataset)
    results: dict[str, SystemResult] = {}
    for name in systems:
        if name in PIPELINE_SYSTEMS:
            results[name] = await run_pipeline_system(
                runtime, who, dataset, name, PIPELINE_SYSTEMS[name]
            )
        elif name == "filename":
            results[name] = await run_filename_system(runtime, who, dataset)
        elif isinstance(peers.get(name), str) or name not in peers:
            results[name] = SystemResult(name, {}, {}, notes=[f"not run: {peers.get(name)}"])
        else:
            results[name] = await run_peer(peers[name], runtime, dataset, name)
    return {
        "dataset": dataset.name,
        "language": dataset.language,
        "documents": len(dataset.docs),
        "queries": len(dataset.queries),
        "sources": [s.url for s in dataset.sources],
        "ingest": ingest_stats,
        "systems": {
            name: {
                "metrics": r.metrics,
                "latency_ms": r.latency_ms,
                "notes": r.notes,
                "per_query": r.per_query,
            }
            for name, r in results.items()
        },
    }
