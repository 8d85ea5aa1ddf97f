"""Quality benchmark: every system on every dataset, in one run, through the real services."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from copy import copy
from dataclasses import dataclass, field, replace
from datetime import datetime
from statistics import mean, quantiles
from typing import Any
from uuid import UUID

from sqlalchemy import text
from tqdm import tqdm

from benchmark.datasets import Dataset
from benchmark.metrics import aggregate, per_query
from benchmark.stats import paired_test, primary_metric, split_metrics, split_of
from knowmind.api.outputs import inline_relations
from knowmind.errors import OverloadedError
from knowmind.ingest.pipeline import passage_text
from knowmind.recall.base import RecallRequest
from knowmind.recall.registry import STAGE_NAMES
from knowmind.runtime import Runtime, freeze_live_objects
from knowmind.services.auth import Principal
from knowmind.services.memories import MemoryDraft
from knowmind.services.turns import ConversationDraft, TurnDraft, remember_conversation

__all__ = [
    "LEXICAL_ABLATIONS",
    "PIPELINE_SYSTEMS",
    "PipelineSystem",
    "SystemResult",
    "evaluate_dataset",
]

ALL_STAGES = STAGE_NAMES
# Stages worth an ablation here: the datasets carry no tagged statement chunks (knowmind's
# client adds them), so "statements" finds nothing in them (tests/test_statements.py measures it).
ABLATED_STAGES = tuple(s for s in STAGE_NAMES if s not in ("statements", "time"))
TIME_FEATURES = (
    "in_window", "window_distance", "dated", "q_time", "q_when", "time_rank", "time_score",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class PipelineSystem:
    stages: tuple[str, ...] | None = None  # None: all
    fusion: str | None = None  # None: the runtime's default
    ranker: str | None = None  # None: the runtime's default
    ignore_features: tuple[str, ...] = ()  # ranker features treated as unknown
    settings: tuple[tuple[str, object], ...] = ()  # overrides: a runtime of its own


# Each new lexical feature off, by its setting, on the same database and embedder.
LEXICAL_ABLATIONS = {
    "knowmind-no-typo": (("bm25_typos", "off"),),
    "knowmind-no-compounds": (("bm25_compounds", "off"),),
    "knowmind-no-query-language": (("bm25_query_language", "off"),),
}
# "filename" and the peers are not pipelines. "knowmind" is the default pipeline (every stage,
# RRF, the learned ranker); "knowmind-rrf" the same stages in their fused order (the baseline
# the ranker must beat); each "knowmind-no-<stage>" the learned ranker without that stage.
PIPELINE_SYSTEMS: dict[str, PipelineSystem] = {
    "fulltext": PipelineSystem(("bm25",)),
    "vector": PipelineSystem(("vector",)),
    "hybrid": PipelineSystem(("bm25", "vector")),
    "knowmind": PipelineSystem(),
    **{
        f"knowmind-no-{s}": PipelineSystem(tuple(x for x in ALL_STAGES if x != s))
        for s in ABLATED_STAGES
    },
    "knowmind-rrf": PipelineSystem(fusion="rrf", ranker="rrf"),
    # time awareness off: the stage and the ranker's time features; speaker evidence off
    "knowmind-no-time": PipelineSystem(
        tuple(x for x in ALL_STAGES if x != "time"), ignore_features=TIME_FEATURES
    ),
    "knowmind-no-speaker": PipelineSystem(ignore_features=("speaker_named",)),
    **{name: PipelineSystem(settings=o) for name, o in LEXICAL_ABLATIONS.items()},
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
    extraction links passages that mention another passage's title), and a dataset's own
    entities are created with their classes; then every document is remembered through the
    memory service with its inline relations, and extraction is awaited."""
    started = time.perf_counter()
    if dataset.titles_as_entities:
        for title in tqdm(sorted({d.title for d in dataset.docs}), desc="entities", leave=False):
            await runtime.graph.service.upsert_entity(who, title, "Topic")
    for name, entity_class, aliases in dataset.entities:
        await runtime.graph.service.upsert_entity(who, name, entity_class, aliases=aliases)
    if dataset.conversational:
        await _remember_conversations(runtime, who, dataset)
        return await _extracted(runtime, who, dataset, started, time.perf_counter() - started)
    semaphore = asyncio.Semaphore(INGEST_CONCURRENCY)
    bar = tqdm(total=len(dataset.docs), desc=f"ingest {dataset.name}", leave=False)

    async def one(doc: Any) -> None:
        async with semaphore:
            draft = MemoryDraft(
                content=doc.text,
                title=doc.title or None,
                source=doc.id,
                memory_type="reference",
                relations=inline_relations(doc.relations),
                occurred_at=doc.occurred_at,
                speaker=doc.speaker,
                session_id=doc.session,
            )
            await _remember(runtime, who, draft)
            bar.update()

    await asyncio.gather(*(one(d) for d in dataset.docs))
    bar.close()
    return await _extracted(runtime, who, dataset, started, time.perf_counter() - started)


async def _extracted(
    runtime: Runtime, who: Principal, dataset: Dataset, started: float, remembered: float
) -> dict[str, float]:
    """Waits for extraction, then the ingest statistics."""
    while (await runtime.admin.health.stats(who))["pending_jobs"]:
        await asyncio.sleep(0.2)
    return {
        "documents": len(dataset.docs),
        "ingest_s": round(remembered, 2),
        "extraction_done_s": round(time.perf_counter() - started, 2),
        "docs_per_s": round(len(dataset.docs) / remembered, 2),
    }


async def _remember_conversations(runtime: Runtime, who: Principal, dataset: Dataset) -> None:
    """Each session of the dataset remembered in one conversation call (its turns in order,
    with their times and speakers; the window of earlier turns as the dataset says)."""
    service = runtime.ingest.memories
    if dataset.turn_context is not None:
        service = copy(service)
        service.ingest = replace(service.ingest, turn_context=dataset.turn_context)
    sessions: dict[str, list[Any]] = {}
    for doc in dataset.docs:
        sessions.setdefault(doc.session or "", []).append(doc)
    for session, docs in tqdm(sessions.items(), desc=f"ingest {dataset.name}", leave=False):
        messages = tuple(
            TurnDraft(content=d.text, speaker=d.speaker, occurred_at=d.occurred_at, id=d.id)
            for d in docs
        )
        draft = ConversationDraft(messages=messages, session_id=session or None)
        while True:
            try:
                await remember_conversation(service, who, draft)
                break
            except OverloadedError as exc:
                await asyncio.sleep(min(exc.retry_after_s, 1.0))


# The tenants a dataset is searched in: one per partition, in ``Dataset.parts()`` order.
Tenants = list[Principal]


def _searched(dataset: Dataset, tenants: Tenants) -> list[tuple[Dataset, Principal]]:
    parts = dataset.parts()
    if len(parts) != len(tenants):
        raise ValueError(f"{dataset.name}: {len(parts)} partitions but {len(tenants)} tenants")
    return list(zip(parts, tenants, strict=True))


async def _remember(runtime: Runtime, who: Principal, draft: MemoryDraft) -> None:
    """As a well-behaved client does: a write refused for the tenant's queued background work
    (429) waits until extraction has caught up, then tries again."""
    while True:
        try:
            await runtime.ingest.memories.remember(who, draft)
            return
        except OverloadedError as exc:
            await asyncio.sleep(min(exc.retry_after_s, 1.0))


async def run_pipeline_system(
    runtime: Runtime, tenants: Tenants, dataset: Dataset, name: str, system: PipelineSystem
) -> SystemResult:
    rows, per_q, notes = [], {}, set()
    stage_times: dict[str, list[float]] = {}
    bar = tqdm(total=len(dataset.queries), desc=f"{dataset.name}/{name}", leave=False)
    for part, who in _searched(dataset, tenants):
        doc_of = await document_ids(runtime, who)
        for query in part.queries:
            request = system_request(name, system, query.text, query.reference_time)
            outcome = await runtime.recall.service.recall(who, request)
            ranking = [doc_of.get(r.chunk.memory_id) or "" for r in outcome.results]
            qrels = part.qrels[query.id]
            scores = per_query(ranking, qrels)
            rows.append(scores)
            per_q[query.id] = {
                "ranking": ranking,
                "scores": [r.score for r in outcome.results],
                "relevant": [qrels.get(source, 0) > 0 for source in ranking],
                "kind": query.kind,
                **scores,
            }
            notes.update(outcome.degraded_reasons)
            for stage, ms in outcome.timings_ms.items():
                stage_times.setdefault(stage, []).append(ms)
            bar.update()
    bar.close()
    latency = {stage: percentiles(values) for stage, values in stage_times.items()}
    return SystemResult(name, aggregate(rows), latency, per_q, sorted(notes))


async def document_ids(runtime: Runtime, who: Principal) -> dict[UUID, str]:
    """{memory id: the dataset's document id}: a memory's ``source``, or a conversation turn's
    message id."""
    assert who.tenant_id is not None
    async with runtime.database.db.tenant_tx(who.tenant_id) as conn:
        rows = await conn.execute(
            text(
                "SELECT id, coalesce(source, metadata ->> 'message_id') FROM memories "
                "WHERE tenant_id = :t"
            ),
            {"t": who.tenant_id},
        )
        return {row[0]: row[1] for row in rows if row[1] is not None}


def system_request(
    name: str, system: PipelineSystem, text: str, reference_time: datetime | None = None
) -> RecallRequest:
    """The recall a system makes: baselines are plain fused rankings; knowmind systems use the
    configured ranker and rerank when a reranker is active."""
    ours = name.startswith("knowmind")
    return RecallRequest(
        text=text,
        k=K,
        reference_time=reference_time,
        stages=system.stages,
        rerank=None if ours else False,
        fusion=system.fusion,
        ranker=system.ranker if ours else "rrf",
        ignore_features=system.ignore_features,
        hops=2,
    )


async def run_filename_system(runtime: Runtime, tenants: Tenants, dataset: Dataset) -> SystemResult:
    """Title match only: pg_trgm similarity between the question and memory titles."""
    rows, per_q, times = [], {}, []
    for part, who in _searched(dataset, tenants):
        assert who.tenant_id is not None
        for query in tqdm(part.queries, desc=f"{dataset.name}/filename", leave=False):
            started = time.perf_counter()
            async with runtime.database.db.tenant_tx(who.tenant_id) as conn:
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
            scores = per_query(ranking, part.qrels[query.id])
            rows.append(scores)
            per_q[query.id] = {"ranking": ranking, **scores}
    return SystemResult("filename", aggregate(rows), {"total": percentiles(times)}, per_q)


async def run_peer(peer: Any, runtime: Runtime, dataset: Dataset, name: str) -> SystemResult:
    """A peer system on the same texts and the same vectors (from the embedding cache), one
    index per partition."""
    from benchmark.peers import PeerDoc

    embedder = runtime.models.embedder
    rows, per_q, times = [], {}, []
    for part in dataset.parts():
        passages = [passage_text(d.title, d.text) for d in part.docs]
        vectors = await embedder.embed_passages(passages)
        await asyncio.to_thread(
            peer.index,
            [PeerDoc(d.id, d.title, d.text) for d in part.docs],
            vectors,
            part.language,
        )
        for query in tqdm(part.queries, desc=f"{dataset.name}/{name}", leave=False):
            vector = (await embedder.embed_queries([query.text]))[0]
            started = time.perf_counter()
            ranking = await asyncio.to_thread(peer.search, query.text, vector, K)
            times.append((time.perf_counter() - started) * 1000)
            scores = per_query(ranking, part.qrels[query.id])
            rows.append(scores)
            per_q[query.id] = {"ranking": ranking, **scores}
    return SystemResult(name, aggregate(rows), {"search": percentiles(times)}, per_q)


async def ingested_tenant(runtime: Runtime, dataset: Dataset) -> tuple[Tenants, dict[str, float]]:
    """New tenants (one per partition) holding the dataset's documents, and the ingest
    statistics."""
    tenants, stats = [], []
    for part in dataset.parts():
        tenant = await runtime.admin.admin.create_tenant(
            f"bench-{dataset.name}-{time.time_ns()}", part.language
        )
        who = Principal(UUID(str(tenant.id)), frozenset({"write"}), language=part.language)
        stats.append(await ingest(runtime, who, part))
        tenants.append(who)
    # as autovacuum would within a minute or two: queries right after a bulk load should not
    # be timed with plans made for an empty tenant
    await runtime.admin.admin.refresh_statistics()
    ingest_s = sum(s["ingest_s"] for s in stats)
    return tenants, {
        "documents": sum(s["documents"] for s in stats),
        "ingest_s": round(ingest_s, 2),
        "extraction_done_s": round(sum(s["extraction_done_s"] for s in stats), 2),
        "docs_per_s": round(sum(s["documents"] for s in stats) / ingest_s, 2) if ingest_s else 0,
        **({"tenants": len(tenants)} if len(tenants) > 1 else {}),
    }


async def evaluate_dataset(
    runtime: Runtime,
    dataset: Dataset,
    systems: list[str],
    peers: dict[str, Any],
    tenant: tuple[Tenants, dict[str, float]] | None = None,
    variants: Mapping[str, Runtime | str] | None = None,
) -> dict[str, Any]:
    """Every system on the dataset. ``tenant``: the documents are already ingested there (a
    typo set shares its clean set's). ``variants``: the runtime of each settings ablation, or
    why it could not be built."""
    tenants, ingest_stats = tenant or await ingested_tenant(runtime, dataset)
    variants = variants or {}
    results: dict[str, SystemResult] = {}
    for name in systems:
        # what the harness holds (datasets, vectors, earlier systems' results) is no server's:
        # a full collection over it took 190-400 ms inside whichever recall set it off
        freeze_live_objects("benchmark harness")
        spec = PIPELINE_SYSTEMS.get(name)
        if spec is not None and spec.settings:
            variant = variants.get(name, "not built")
            if isinstance(variant, str):
                results[name] = SystemResult(name, {}, {}, notes=[f"not run: {variant}"])
            else:
                results[name] = await run_pipeline_system(variant, tenants, dataset, name, spec)
        elif spec is not None:
            results[name] = await run_pipeline_system(runtime, tenants, dataset, name, spec)
        elif name == "filename":
            results[name] = await run_filename_system(runtime, tenants, dataset)
        elif isinstance(peers.get(name), str) or name not in peers:
            results[name] = SystemResult(name, {}, {}, notes=[f"not run: {peers.get(name)}"])
        else:
            results[name] = await run_peer(peers[name], runtime, dataset, name)
    return {
        "dataset": dataset.name,
        "language": dataset.language,
        "documents": len(dataset.docs),
        "queries": len(dataset.queries),
        "primary_metric": primary_metric(dataset.name),
        "sources": [s.url for s in dataset.sources],
        "ingest": ingest_stats,
        "systems": {
            name: {
                "metrics": r.metrics,
                "splits": split_metrics(dataset.name, r.per_query, list(r.metrics)),
                "latency_ms": r.latency_ms,
                "notes": r.notes,
                "per_query": r.per_query,
            }
            for name, r in results.items()
        },
        "significance": significance(dataset.name, results),
    }


PEER_NAMES = ("txtai-bb25", "lancedb-hybrid")
SPLITS = ("dev", "test")


def significance(dataset: str, results: Mapping[str, SystemResult]) -> dict[str, Any]:
    """knowmind against the vector stage and against the best peer (by the test split's
    primary metric), per split: paired randomisation test and win/loss/tie."""
    metric = primary_metric(dataset)
    ours = results.get("knowmind")
    if ours is None or not ours.per_query:
        return {}

    def scores(result: SystemResult, part: str) -> dict[str, float]:
        return {
            q: float(r[metric]) for q, r in result.per_query.items() if split_of(dataset, q) == part
        }

    peers = [results[p] for p in PEER_NAMES if p in results and results[p].per_query]
    rivals = {"vector": results.get("vector")}
    if peers:
        best = max(peers, key=lambda r: mean(scores(r, "test").values() or [0.0]))
        rivals["best_peer"] = best
    out: dict[str, Any] = {"metric": metric}
    for label, rival in rivals.items():
        if rival is None or not rival.per_query:
            continue
        tests = {part: paired_test(scores(ours, part), scores(rival, part)) for part in SPLITS}
        out[label] = {"system": rival.system, **tests}
    return out
