"""Latency at scale, ingest overhead and storage cost.

The large tenant's vectors are synthetic (clustered random unit vectors, texts from a fixed
vocabulary) and inserted in bulk without the model — embedding 100k chunks would take hours
here. Queries are embedded by the real model ("with embedding") or served from the embedding
cache on a repeat ("without").
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any
from uuid import UUID

import numpy as np
from pgvector.sqlalchemy import Vector
from sqlalchemy import bindparam, text
from tqdm import tqdm

from benchmark.runner import percentiles
from knowmind.recall.base import RecallRequest
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.memories import MemoryDraft, content_sha256

__all__ = ["run_scale"]

_VOCABULARY = (
    "Vertrag Kunde Server Rechnung Projekt Lager Termin Angebot Wartung Backup Netzwerk "
    "Datenbank Anwendung Mitarbeiter Abteilung Standort Lieferung Auftrag Zahlung Störung "
    "Freigabe Zertifikat Schnittstelle Bericht Planung Budget Schulung Einkauf Vertrieb Support "
    "Hamburg Berlin München Kassel Ulm Kiel Montag Dienstag Juni Oktober neu alt dringend offen"
)
WORDS = tuple(_VOCABULARY.split())
BATCH = 1000


def _text(rng: random.Random, words: int = 30) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "."


def _vectors(rng: np.random.Generator, n: int, dim: int, centres: np.ndarray) -> np.ndarray:
    picks = centres[rng.integers(0, len(centres), n)]
    vectors = picks + 0.35 * rng.standard_normal((n, dim)).astype(np.float32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


async def _bulk_tenant(runtime: Runtime, name: str, chunks: int, seed: int) -> Principal:
    tenant = await runtime.admin.create_tenant(name, "german")
    who = Principal(UUID(str(tenant.id)), frozenset({"write"}), language="german")
    rng, np_rng = random.Random(seed), np.random.default_rng(seed)
    dim = runtime.embedder.dim
    centres = _vectors(np_rng, 64, dim, np.zeros((1, dim), dtype=np.float32) + 0.01)
    insert_chunk = text(
        "INSERT INTO chunks (tenant_id, memory_id, ordinal, content, context, language, "
        "embedding) VALUES (:t, :m, 0, :c, NULL, 'german', :e)"
    ).bindparams(bindparam("e", type_=Vector()))
    for start in tqdm(range(0, chunks, BATCH), desc=f"bulk {name}", leave=False):
        n = min(BATCH, chunks - start)
        texts = [f"{i} {_text(rng)}" for i in range(start, start + n)]
        vectors = _vectors(np_rng, n, dim, centres)
        async with runtime.db.tenant_tx(who.tenant_id) as conn:  # type: ignore[arg-type]
            ids = (
                (
                    await conn.execute(
                        text(
                            "INSERT INTO memories (tenant_id, content, content_sha256) "
                            "SELECT :t, c, sha FROM "
                            "unnest(CAST(:cs AS text[]), CAST(:shas AS bytea[])) "
                            "AS x(c, sha) RETURNING id"
                        ),
                        {
                            "t": who.tenant_id,
                            "cs": texts,
                            "shas": [content_sha256(t) for t in texts],
                        },
                    )
                )
                .scalars()
                .all()
            )
            await conn.execute(
                insert_chunk,
                [
                    {"t": who.tenant_id, "m": m, "c": c, "e": v}
                    for m, c, v in zip(ids, texts, vectors, strict=True)
                ],
            )
    return who


async def _latency(
    runtime: Runtime, who: Principal, queries: list[str], concurrency: int
) -> dict[str, Any]:
    semaphore = asyncio.Semaphore(concurrency)
    stage_times: dict[str, list[float]] = {}
    wall: list[float] = []

    async def one(query: str) -> None:
        async with semaphore:
            started = time.perf_counter()
            request = RecallRequest(text=query, k=10, hops=2)
            outcome = await runtime.recall.recall(who, request)
            wall.append((time.perf_counter() - started) * 1000)
            for stage, ms in outcome.timings_ms.items():
                stage_times.setdefault(stage, []).append(ms)

    started = time.perf_counter()
    await asyncio.gather(*(one(q) for q in queries))
    elapsed = time.perf_counter() - started
    return {
        "requests": len(queries),
        "throughput_rps": round(len(queries) / elapsed, 2),
        "end_to_end_ms": percentiles(wall),
        "stages_ms": {s: percentiles(v) for s, v in stage_times.items()},
    }


async def _ingest_overhead(runtime: Runtime, n: int) -> dict[str, Any]:
    """Ingest through the memory service vs. the embedder alone, on the same (new) texts."""
    rng = random.Random(11)
    nonce = time.time_ns()
    raw_texts = [f"{nonce} raw {i} {_text(rng, 40)}" for i in range(n)]
    inner = getattr(runtime.embedder.embedder, "inner", runtime.embedder.embedder)
    started = time.perf_counter()
    await asyncio.to_thread(inner.embed_passages, raw_texts)
    raw_rate = n / (time.perf_counter() - started)
    tenant = await runtime.admin.create_tenant(f"bench-ingest-{nonce}", "german")
    who = Principal(UUID(str(tenant.id)), frozenset({"write"}), language="german")
    texts = [f"{nonce} ingest {i} {_text(rng, 40)}" for i in range(n)]
    semaphore = asyncio.Semaphore(8)

    async def one(content: str) -> None:
        async with semaphore:
            await runtime.memories.remember(who, MemoryDraft(content=content))

    started = time.perf_counter()
    await asyncio.gather(*(one(t) for t in texts))
    ingest_rate = n / (time.perf_counter() - started)
    return {
        "texts": n,
        "embedder_passages_per_s": round(raw_rate, 2),
        "ingest_memories_per_s": round(ingest_rate, 2),
        "ingest_to_embedder_ratio": round(ingest_rate / raw_rate, 3),
    }


async def run_scale(runtime: Runtime, chunks: int) -> dict[str, Any]:
    small = max(200, chunks // 100)
    started = time.perf_counter()
    big = await _bulk_tenant(runtime, f"bench-scale-{time.time_ns()}", chunks, seed=1)
    for i in range(9):
        await _bulk_tenant(runtime, f"bench-small-{i}-{time.time_ns()}", small, seed=100 + i)
    load_s = time.perf_counter() - started
    rng = random.Random(5)
    queries = [f"{_text(rng, 6)} q{i}" for i in range(60 if chunks >= 50_000 else 30)]
    latency = {}
    for concurrency in (1, 8):
        fresh = [f"{q} c{concurrency}" for q in queries]
        latency[f"c{concurrency}_with_embedding"] = await _latency(runtime, big, fresh, concurrency)
        latency[f"c{concurrency}_cached_embedding"] = await _latency(
            runtime, big, fresh, concurrency
        )
    async with runtime.db.owner_tx() as conn:
        total_chunks = await conn.scalar(text("SELECT count(*) FROM chunks"))
        size = await conn.scalar(
            text("SELECT pg_total_relation_size('chunks') + pg_total_relation_size('memories')")
        )
    return {
        "large_tenant_chunks": chunks,
        "small_tenants": 9,
        "small_tenant_chunks": small,
        "vectors": "synthetic (clustered random unit vectors), inserted without the model",
        "bulk_load_s": round(load_s, 1),
        "latency": latency,
        "ingest": await _ingest_overhead(runtime, 40 if chunks < 50_000 else 120),
        "storage": {
            "chunks_in_database": int(total_chunks),
            "mb_per_1k_chunks": round(size / max(total_chunks, 1) * 1000 / 2**20, 3),
        },
    }
