"""Recall at scale: latency per tenant size, concurrency and embedding mode; HNSW recall@10
against exact search (along the path the vector stage takes for the largest tenant, and through
the global index); storage per 1k chunks (vector(384), halfvec(1024)); ingest throughput.
After loading, tenants with at least ``KNOWMIND_VECTOR_TENANT_INDEX_MIN_ROWS`` chunks get their
own HNSW index (``knowmind tenant-index --auto``; build time in scale.json's corpus section).

``python -m benchmark.scale --out DIR`` (``make bench-scale``) writes DIR/scale.json
(``{"runs": [{"tenant_chunks", "corpus_chunks", "concurrency", "embedding", "req_per_s",
"p50_ms", "p95_ms", "stages_p50_ms"}], ...}``; 1 and 8 clients are measured in alternated
pairs, and an 8-client run also holds each pair's ratios and their medians; with the database
on this host, every run also has the server's CPU per request and each pair its core-bound
ceiling, see ``benchmark.cpu``; ``replicas``: the largest tenant's 1 against 8 clients again,
served by two API replicas on this host, see ``benchmark.scale_replicas``), DIR/scale.md and
DIR/scale_latency.png.
Layouts: ``full`` (one tenant of 100k chunks, one of 10k, 100 of 1k, 1,000 of 100), ``1m``
(full plus a 1M-chunk tenant: ``--scale-1m``) and ``quick`` (CI: 3k, 1k and 100-chunk tenants).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

import numpy as np
from sqlalchemy import text
from tqdm import tqdm

from benchmark.cache import CachingEmbedder
from benchmark.cpu import CpuClock
from benchmark.runner import percentiles
from benchmark.scale_corpus import TenantSpec, bulk_load, sentence_pool
from benchmark.scale_profile import PRELOAD_OPTIONS, recall_profile
from benchmark.scale_replicas import REPLICAS, ReplicaJob, Replicas
from benchmark.scale_report import write_scale_report
from benchmark.scale_sampling import QueryCacheEmbedder, Sample, sample_recalls, warm_runtime
from benchmark.scale_storage import measure_ingest, storage_per_1k
from knowmind.runtime import Runtime, freeze_live_objects
from knowmind.services.auth import Principal
from knowmind.services.tenant_index import TenantIndexService
from knowmind.settings import Settings, available_cores
from knowmind.store.search import MemoryFilters
from knowmind.store.vector_search import (
    VectorPath,
    choose_vector_path,
    path_ef_search,
    vector_candidates,
)

__all__ = ["LAYOUTS", "run_scale"]

ROOT = Path(__file__).resolve().parent.parent
# Passes over the questions per measurement: percentiles over 3 × 60 requests move less from
# run to run than over 60.
ROUNDS = 3
# 1 and 8 clients measured in alternation, this many times (see _one_against_eight)
PAIRS = 3
# the concurrent clients measured against one
EIGHT = 8
# each replica's share of them (``_one_against_eight_replicas``)
PER_REPLICA = EIGHT // REPLICAS


def _layout(big: Sequence[int], thousands: int, hundreds: int) -> list[TenantSpec]:
    languages = ("german", "english")
    specs = [TenantSpec(f"scale-{n}", n, "german") for n in big]
    specs += [TenantSpec(f"scale-1k-{i}", 1000, languages[i % 2]) for i in range(thousands)]
    specs += [TenantSpec(f"scale-100-{i}", 100, languages[i % 2]) for i in range(hundreds)]
    return specs


LAYOUTS = {
    "quick": {"tenants": _layout([3000], 3, 30), "sentences": 300, "queries": 12},
    "full": {"tenants": _layout([100_000, 10_000], 100, 1000), "sentences": 3000, "queries": 60},
    "1m": {
        "tenants": _layout([1_000_000, 100_000, 10_000], 100, 1000),
        "sentences": 3000,
        "queries": 60,
        # the HNSW graphs of 1.4M and 1M vectors(384) are ~3 GB and ~2 GB: built in memory
        "maintenance_work_mem": "6GB",
    },
}


async def _measure(
    runtime: Runtime,
    who: Principal,
    queries: list[str],
    concurrency: int,
    rounds: int = 1,
    clock: CpuClock | None = None,
) -> dict[str, Any]:
    """Every query ``rounds`` times (in turn) by ``concurrency`` clients: throughput,
    latency percentiles over all requests, each stage's median and (with ``clock``) the
    server's CPU time per request."""
    return (await sample_recalls(runtime, who, queries, concurrency, rounds, clock)).summary()


def _pair_ratios(alone: dict[str, Any], loaded: dict[str, Any], cores: int) -> dict[str, float]:
    """8 clients against 1, measured back to back; with CPU times, also the core-bound
    ceiling: the throughput of every core busy at the 8 clients' CPU per request
    (``throughput_x_ceiling``, against 1 client's), and the 8 clients' mean latency there
    (Little's law: clients / throughput) against 1 client's p95 (``latency_x_at_ceiling``)."""
    ratios = {
        "throughput_x": round(loaded["req_per_s"] / alone["req_per_s"], 3),
        "p95_x": round(loaded["p95_ms"] / alone["p95_ms"], 3),
    }
    if "cpu_ms_per_req" in loaded:
        ceiling_per_s = cores * 1000 / loaded["cpu_ms_per_req"]
        ratios["throughput_x_ceiling"] = round(ceiling_per_s / alone["req_per_s"], 3)
        mean_ms = EIGHT * 1000 / ceiling_per_s
        ratios["latency_x_at_ceiling"] = round(mean_ms / alone["p95_ms"], 3)
    return ratios


async def _one_against_eight(
    runtime: Runtime,
    who: Principal,
    queries: list[str],
    pairs: int,
    clock: CpuClock | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """1 client, then 8, ``pairs`` times in alternation (``_paired``), after one unmeasured
    pass at 8 clients: that opens the pools' sessions for 8 (a new backend's first statements
    fill its catalogue caches), which the first pair's 8 clients paid for before (its ratio the
    lowest of three in 7 of the 8 runs until then). The host's speed drifts by 10-20 % within
    minutes here; a ratio of two runs taken back to back is about the server, one of runs
    minutes apart as much about the host."""
    await sample_recalls(runtime, who, queries, EIGHT, 1)
    measured = []
    for _ in range(pairs):
        alone = await sample_recalls(runtime, who, queries, 1, ROUNDS, clock)
        measured.append((alone, await sample_recalls(runtime, who, queries, EIGHT, ROUNDS, clock)))
    return _paired(measured)


async def _one_against_eight_replicas(job: ReplicaJob, pairs: int) -> dict[str, Any]:
    """The same with two API replicas on this host (``benchmark.scale_replicas``): 1 client on
    one of them, then ``job.clients`` on each (``PER_REPLICA`` in the scale run: 8 in all),
    ``pairs`` times in alternation. No CPU clock: the replicas are other processes."""
    measured = []
    async with Replicas(job) as replicas:
        idle = [0] * (REPLICAS - 1)
        for _ in range(pairs):
            wall_ms, elapsed_s = await replicas.run([1, *idle], ROUNDS)
            alone = Sample(wall_ms, elapsed_s=elapsed_s)
            wall_ms, elapsed_s = await replicas.run([job.clients] * REPLICAS, ROUNDS)
            measured.append((alone, Sample(wall_ms, elapsed_s=elapsed_s)))
    one, eight = _paired(measured)
    return {"replicas": REPLICAS, "clients_per_replica": job.clients, "1": one, "8": eight}


def _paired(measured: list[tuple[Sample, Sample]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Alternated (1 client, 8 clients) samples: each side's requests pooled, and on the
    8-client side each pair's ratios (``_pair_ratios``) and their medians."""
    one, eight, ratios = Sample(), Sample(), []
    cores = available_cores()
    for alone, loaded in measured:
        one.add(alone)
        eight.add(loaded)
        ratios.append(_pair_ratios(alone.summary(), loaded.summary(), cores))
    medians = {
        f"{key}_median": round(float(np.median([r[key] for r in ratios])), 3) for key in ratios[0]
    }
    return one.summary(), eight.summary() | {"pairs": ratios, **medians}


async def _hnsw_recall_at_10(
    runtime: Runtime,
    tenant: UUID,
    vectors: list[np.ndarray],
    candidates: int,
    ef_search: int,
    path: VectorPath,
) -> dict[str, Any]:
    """Overlap of the ``path`` top 10 with the exact top 10, and the query time, per
    ``hnsw.ef_search``: asking for 10 rows, and as the vector stage does, for ``candidates``
    rows (re-sorted exactly) of which the first 10 are compared."""

    async def top10(vector: np.ndarray, path: Any, ef: int, limit: int) -> tuple[set[UUID], float]:
        async with runtime.database.db.tenant_tx(tenant) as conn:
            started = time.perf_counter()
            rows = await vector_candidates(
                conn, tenant, vector, MemoryFilters(), limit, path=path, ef_search=ef
            )
            return {r[0] for r in rows[:10]}, (time.perf_counter() - started) * 1000

    exact = [(await top10(v, "exact", 0, 10))[0] for v in vectors]
    result: dict[str, Any] = {"path": path, "queries": len(vectors), "candidates": candidates}
    for limit in (10, candidates):
        by_ef = {}
        for ef in (40, 100, 200, 400):
            found = [await top10(v, path, ef, limit) for v in vectors]
            overlap = [len(e & f) / max(1, len(e)) for e, (f, _) in zip(exact, found, strict=True)]
            by_ef[str(ef)] = {
                "recall_at_10": round(float(np.mean(overlap)), 4),
                "p50_ms": percentiles([ms for _, ms in found])["p50"],
            }
        result[f"limit_{limit}"] = by_ef
    # what the vector stage gets: candidates rows at ef_search = max(ef_search, candidates)
    result["ef_search"] = max(ef_search, candidates)
    served = result[f"limit_{candidates}"].get(str(result["ef_search"]), {})
    result["recall_at_10"] = served.get("recall_at_10")
    return result


async def _build_tenant_indexes(runtime: Runtime, min_rows: int) -> dict[str, Any]:
    """What ``knowmind tenant-index --auto`` does, timed."""
    started = time.perf_counter()
    built = await TenantIndexService(runtime.database.db).build_for_large(min_rows)
    return {
        "tenant_index_min_rows": min_rows,
        "tenant_indexes": [r.chunks for r in built],
        "tenant_index_build_s": round(time.perf_counter() - started, 2),
    }


async def _stage_path(runtime: Runtime, tenant: UUID, exact_max_rows: int) -> VectorPath:
    async with runtime.database.db.tenant_tx(tenant) as conn:
        return await choose_vector_path(conn, tenant, exact_max_rows)


async def run_scale(
    settings: Settings,
    model: Any,
    layout: str,
    data_dir: Path,
    cache: Path,
    statements: bool = False,
) -> dict[str, Any]:
    """Load the layout into ``settings.database_url`` and measure; returns scale.json's data.
    ``statements``: profile the largest tenant's recalls too (``benchmark.scale_profile``)."""
    spec = LAYOUTS[layout]
    cached_model = CachingEmbedder(model, cache)
    pool = await asyncio.to_thread(sentence_pool, data_dir, spec["sentences"], cached_model)
    tenants: list[TenantSpec] = spec["tenants"]
    assert settings.database.database_url
    with tqdm(total=sum(t.chunks for t in tenants), desc="scale corpus", unit="chunk") as bar:
        ids, load_s = await bulk_load(
            settings.database.database_url,
            tenants,
            pool,
            bar.update,
            str(spec.get("maintenance_work_mem", "1GB")),
        )
    queries = pool.questions[: spec["queries"]]
    embedder = QueryCacheEmbedder(model, queries, cached_model.embed_queries(queries))
    runtime = await warm_runtime(settings, embedder)
    try:
        async with runtime.database.db.owner_tx() as conn:
            corpus = int(await conn.scalar(text("SELECT count(*) FROM chunks")))
        targets = {}  # one tenant per size, smallest first
        for t in sorted(tenants, key=lambda t: t.chunks):
            targets.setdefault(t.chunks, t)
        largest = targets[max(targets)]
        query_vectors = [embedder.cached[q] for q in queries]
        candidates = settings.recall.recall_candidates

        def stage_ef(path: VectorPath) -> int:  # what the vector stage sets along ``path``
            r = settings.recall
            return path_ef_search(path, r.vector_ef_search, r.vector_tenant_ef_search)

        # the global index, measured before any tenant has an index of its own (the planner
        # would prefer the tenant's index for the same statement afterwards)
        global_recall = await _hnsw_recall_at_10(
            runtime, ids[largest.name], query_vectors, candidates, stage_ef("hnsw"), path="hnsw"
        )
        indexes = await _build_tenant_indexes(runtime, settings.recall.vector_tenant_index_min_rows)
        print(json.dumps(indexes), file=sys.stderr)
        runs = []
        cold_passes: dict[str, dict[str, float]] = {}
        freeze_live_objects("benchmark harness")  # the corpus pool, the cached query vectors
        clock = await CpuClock.of_database(runtime)
        for size, target in targets.items():
            who = Principal(ids[target.name], frozenset({"read"}), language=target.language)
            embedder.mode = "cached"
            # one whole unmeasured pass first: the pages these questions touch are read from
            # disk once (a three-question warm-up left the first measured pass on a cold
            # 100k tenant with a p95 4-5 × its p50); the cold pass is reported on its own
            cold = await _measure(runtime, who, queries, 1)
            cold_passes[str(size)] = {k: cold[k] for k in ("p50_ms", "p95_ms")}
            for mode in ("cached", "live"):
                embedder.mode = mode
                if size >= min(100_000, max(targets)):
                    results = await _one_against_eight(runtime, who, queries, PAIRS, clock)
                else:
                    results = (await _measure(runtime, who, queries, 1, ROUNDS, clock),)
                for concurrency, result in zip((1, EIGHT), results, strict=False):
                    runs.append(
                        {
                            "tenant_chunks": size,
                            "corpus_chunks": corpus,
                            "concurrency": concurrency,
                            "embedding": mode,
                            **result,
                        }
                    )
                    print(json.dumps(runs[-1]), file=sys.stderr)
        # the largest tenant again, served by two replicas (cached query embeddings)
        replicas = await _one_against_eight_replicas(
            ReplicaJob(
                settings,
                ids[largest.name],
                largest.language,
                queries,
                np.stack(query_vectors),
                clients=PER_REPLICA,
            ),
            PAIRS,
        )
        print(json.dumps({"replicas": replicas}), file=sys.stderr)
        profile = None
        if statements:
            embedder.mode = "cached"
            who = Principal(ids[largest.name], frozenset({"read"}), language=largest.language)
            profile = await recall_profile(runtime, who, queries, _measure)
        path = await _stage_path(runtime, ids[largest.name], settings.recall.vector_exact_max_rows)
        recall = dict(global_recall)
        if path != "hnsw":
            recall = await _hnsw_recall_at_10(
                runtime, ids[largest.name], query_vectors, candidates, stage_ef(path), path=path
            )
        recall |= {"tenant_chunks": largest.chunks, "global_index": global_recall}
        # the standard layout alternates six pairs of one batch each: the host's speed drifts
        ingest_texts_and_rounds = (40, 3) if layout == "quick" else (100, 6)
        return {
            "runs": runs,
            "layout": layout,
            "corpus": {
                "chunks": corpus,
                "tenants": len(tenants),
                "sentences": len(pool.sentences),
                "vectors": "mean of the real-model vectors of each chunk's sentences + noise",
                "load_s": load_s,
                **indexes,
            },
            "cold_pass_1_client": cold_passes,
            "replicas": replicas | {"tenant_chunks": largest.chunks},
            "recall_profile": profile,
            "hnsw_recall_at_10": recall,
            "vector_exact_max_rows": settings.recall.vector_exact_max_rows,
            "storage_per_1k_chunks_mb": await storage_per_1k(runtime.database.db),
            "ingest": await measure_ingest(runtime, model, *ingest_texts_and_rounds),
            "cores": available_cores(),
            "cpu_measured": clock.postmaster is not None,
        }
    finally:
        await runtime.close()


def main(argv: list[str] | None = None) -> int:
    from knowmind.db.embedded import EmbeddedPostgres
    from knowmind.db.migrate import upgrade
    from knowmind.logging import configure_logging
    from knowmind.models.factory import build_embedder

    parser = argparse.ArgumentParser(prog="python -m benchmark.scale", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out")
    parser.add_argument("--quick", action="store_true", help="the small CI layout")
    parser.add_argument("--scale-1m", action="store_true", help="add a 1M-chunk tenant")
    parser.add_argument(
        "--statements",
        action="store_true",
        help="profile the largest tenant's recalls: CPU and PostgreSQL time per statement",
    )
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "datasets")
    default_cache = Path(
        os.environ.get("KNOWMIND_BENCH_CACHE", Path.home() / ".cache" / "knowmind-bench")
    )
    parser.add_argument("--cache", type=Path, default=default_cache / "embeddings.sqlite")
    args = parser.parse_args(argv)
    layout = "quick" if args.quick else "1m" if args.scale_1m else "full"
    configure_logging("json", "warning")
    args.out.mkdir(parents=True, exist_ok=True)
    base = Settings.from_env()
    model = build_embedder(base.models.embedder, base.models.embedder_threads)
    with tempfile.TemporaryDirectory(prefix="knowmind-scale-") as tmp:
        memory = LAYOUTS[layout].get("maintenance_work_mem")
        options = {"maintenance_work_mem": str(memory)} if memory else {}
        if args.statements:
            options |= PRELOAD_OPTIONS
        server = (
            None
            if base.database.database_url
            else EmbeddedPostgres(Path(tmp) / "pgdata", options=options)
        )
        url = base.database.database_url or server.start()  # type: ignore[union-attr]
        try:
            storage = base.database.embedding_storage
            upgrade(url, model.model_id, model.dim, embedding_storage=storage)
            settings = base.with_overrides(database_url=url, data_dir=Path(tmp))
            results = asyncio.run(
                run_scale(settings, model, layout, args.data_dir, args.cache, args.statements)
            )
        finally:
            if server is not None:
                server.stop()
    (args.out / "scale.json").write_text(json.dumps(results, indent=1))
    write_scale_report(results, args.out)
    print(f"wrote {args.out / 'scale.json'} and {args.out / 'scale.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
