"""Storage per 1k chunks by vector type, and ingest throughput against the bare embedder."""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any
from uuid import UUID

from sqlalchemy import text

from knowmind.db.engine import Database
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.batch import MAX_BATCH_ITEMS, remember_batch
from knowmind.services.memories import MemoryDraft

__all__ = ["measure_ingest", "storage_per_1k"]

STORAGE_ROWS = 2000
INGEST_TEXT = (
    "Der Wartungsvertrag für den Server in Kassel wurde im Juni verlängert; "
    "the backup job runs nightly and reports to the support team"
)
VECTOR_TYPES = (("vector", 384), ("halfvec", 384), ("vector", 1024), ("halfvec", 1024))


async def storage_per_1k(db: Database) -> dict[str, Any]:
    """MB per 1k rows of the embedding column and its HNSW index, per type, on clustered
    random vectors; and what a whole chunk costs in this database (row, text, indexes)."""
    sizes: dict[str, Any] = {}
    for kind, dim in VECTOR_TYPES:
        table = f"bench_storage_{kind}_{dim}"
        async with db.owner_tx() as conn:
            await conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
            await conn.execute(text(f"CREATE TABLE {table} (id int, embedding {kind}({dim}))"))
            await conn.execute(
                text(
                    f"INSERT INTO {table} SELECT g, v.a::vector({dim})::{kind}({dim}) "
                    "FROM generate_series(1, :n) g CROSS JOIN LATERAL (SELECT array_agg("
                    "sin(g % 50 + i) + 0.3 * random()) AS a FROM generate_series(1, :d) i "
                    "WHERE g > 0) v"
                ),
                {"n": STORAGE_ROWS, "d": dim},
            )
            await conn.execute(
                text(f"CREATE INDEX ON {table} USING hnsw (embedding {kind}_cosine_ops)")
            )
            size = await conn.scalar(text(f"SELECT pg_total_relation_size('{table}')"))
            await conn.execute(text(f"DROP TABLE {table}"))
        sizes[f"{kind}({dim})"] = round(size / STORAGE_ROWS * 1000 / 2**20, 3)
    async with db.owner_tx() as conn:
        chunks = await conn.scalar(text("SELECT count(*) FROM chunks"))
        total = await conn.scalar(
            text(
                "SELECT pg_total_relation_size('chunks') "
                "+ pg_total_relation_size('chunk_sentences')"
            )
        )
    sizes["chunks_table_as_deployed"] = round(total / max(chunks, 1) * 1000 / 2**20, 3)
    saving = 1 - sizes["halfvec(1024)"] / sizes["vector(1024)"]
    sizes["halfvec_saving_at_1024"] = round(saving, 3)
    return sizes


async def measure_ingest(runtime: Runtime, model: Any, n: int, rounds: int = 3) -> dict[str, Any]:
    """Passages per second of the bare model (batches of 32, its best) vs memories per second
    through the batch service (the code behind ``POST /v1/memories/batch``, batches of 100) on
    the same kind of new one-chunk texts. The two alternate ``rounds`` times, each pair back to
    back, and the ratio is the median of the pairs': this machine's speed drifts by 10–30 %
    within a minute, which two single measurements taken apart would report as the ratio (the
    standard layout alternates six pairs of one batch each, a few seconds per side)."""
    nonce = time.time_ns()
    tenant = await runtime.admin.admin.create_tenant(f"scale-ingest-{nonce}", "german")
    who = Principal(UUID(str(tenant.id)), frozenset({"write"}), language="german")
    pairs = []
    for round_ in range(rounds):
        raw_texts = [f"{INGEST_TEXT} ({nonce} raw {round_}.{i})." for i in range(n)]
        started = time.perf_counter()
        for start in range(0, n, 32):
            await asyncio.to_thread(model.embed_passages, raw_texts[start : start + 32])
        raw_rate = n / (time.perf_counter() - started)
        drafts = [
            MemoryDraft(content=f"{INGEST_TEXT} ({nonce} ingest {round_}.{i}).") for i in range(n)
        ]
        started = time.perf_counter()
        for start in range(0, n, MAX_BATCH_ITEMS):
            batch = drafts[start : start + MAX_BATCH_ITEMS]
            results = await remember_batch(runtime.ingest.memories, who, batch)
            assert all(r.status == "created" for r in results), results
        pairs.append((raw_rate, n / (time.perf_counter() - started)))
    return {
        "texts": n,
        "rounds": rounds,
        "path": "batch service (POST /v1/memories/batch without HTTP), 100 per batch",
        "embedder_passages_per_s": round(statistics.median(raw for raw, _ in pairs), 2),
        "ingest_memories_per_s": round(statistics.median(rate for _, rate in pairs), 2),
        "ingest_to_embedder_ratio": round(statistics.median(r / raw for raw, r in pairs), 3),
        "pairs": [[round(raw, 2), round(rate, 2)] for raw, rate in pairs],
    }
