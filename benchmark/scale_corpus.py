"""The scale corpus: real sentences recombined into chunks, real-model vectors, many tenants.

Text: sentences of the public datasets (XQuAD German and English paragraphs, MuSiQue passages,
DBpedia abstracts; read at run time, never stored in the repository) — a real, Zipf-distributed
German and English vocabulary. A chunk is 2–4 sentences drawn at random from a pool.
Vectors: every pool sentence is embedded once by the real model (the benchmark's disk cache
keeps them); a chunk's vector is the normalised mean of its sentences' vectors plus a little
noise, so chunks cluster like real text and real question embeddings are in distribution.
Graph: each source document's title is an entity; a chunk mentions the entities of the
documents its sentences come from (the gazetteer would find most of them).
Loading: binary COPY through a raw owner connection into the normal tables (so triggers on
chunks fire), with the HNSW index dropped during the load and rebuilt once after it, then
VACUUM (ANALYZE) of the recall tables.
"""

from __future__ import annotations

import hashlib
import random
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector
from sqlalchemy.engine import make_url

from benchmark.datasets import load
from knowmind.linking.names import normalise_name
from knowmind.recall.timeframe import mentions_time
from knowmind.store.sentences import pack_vectors
from knowmind.store.stats import RECALL_TABLES

__all__ = ["SentencePool", "TenantSpec", "bulk_load", "owner_dsn", "sentence_pool"]

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-ZÄÖÜ0-9\"'(])")
ENTITY_CLASS = "Topic"


@dataclass(frozen=True, slots=True)
class SentencePool:
    sentences: list[str]
    sources: list[int]  # index into ``titles`` of each sentence's document
    titles: list[str]
    vectors: np.ndarray  # one real-model passage vector per sentence
    questions: list[str]  # real questions (XQuAD de/en, MuSiQue, DBpedia)


@dataclass(frozen=True, slots=True)
class TenantSpec:
    name: str
    chunks: int
    language: str


def _split(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if 30 <= len(s.strip()) <= 400]


def sentence_pool(data_dir: Path, size: int, embedder, seed: int = 3) -> SentencePool:
    """``size`` sentences, half German (XQuAD de), half English (the other sets), embedded."""
    rng = random.Random(seed)
    german, english, titles, questions = [], [], [], []
    title_ids: dict[str, int] = {}
    for name in ("xquad-de", "xquad-en", "musique", "dbpedia"):
        dataset = load(name, data_dir)
        questions += [q.text for q in dataset.queries]
        for doc in dataset.docs:
            source = title_ids.setdefault(doc.title, len(title_ids))
            target = german if name == "xquad-de" else english
            target += [(s, source) for s in _split(doc.text)]
    titles = list(title_ids)
    rng.shuffle(german)
    rng.shuffle(english)
    picked = german[: size // 2] + english[: size - min(size // 2, len(german))]
    sentences = [s for s, _ in picked]
    vectors = np.asarray(embedder.embed_passages(sentences), dtype=np.float32)
    rng.shuffle(questions)
    return SentencePool(sentences, [i for _, i in picked], titles, vectors, questions)


def owner_dsn(url: str) -> str:
    """A plain ``postgresql://`` DSN for asyncpg from the server's SQLAlchemy URL."""
    parsed = make_url(url).set(drivername="postgresql")
    return parsed.render_as_string(hide_password=False)


def _chunks(
    pool: SentencePool, n: int, rng: np.random.Generator
) -> Iterator[tuple[str, np.ndarray, bytes, set[int]]]:
    """(text, vector, sentence vectors, entity sources) of ``n`` distinct chunks of 2–4 pool
    sentences."""
    seen: set[bytes] = set()
    while len(seen) < n:
        size = int(rng.integers(2, 5))
        picks = rng.integers(0, len(pool.sentences), size)
        content = " ".join(pool.sentences[i] for i in picks)
        digest = hashlib.sha256(content.encode()).digest()
        if digest in seen:
            continue
        seen.add(digest)
        vector = pool.vectors[picks].mean(axis=0)
        vector += rng.normal(0, 0.01, vector.shape).astype(np.float32)
        sentences = pack_vectors(pool.vectors[picks])
        yield content, vector / np.linalg.norm(vector), sentences, {pool.sources[i] for i in picks}


async def _create_tenant(conn: asyncpg.Connection, spec: TenantSpec) -> uuid.UUID:
    model, dim = await conn.fetchrow(
        "SELECT (SELECT value FROM knowmind_meta WHERE key = 'embedding_model'), "
        "(SELECT value::int FROM knowmind_meta WHERE key = 'embedding_dim')"
    )
    return await conn.fetchval(
        "INSERT INTO tenants (name, language, embedding_model, embedding_dim) "
        "VALUES ($1, $2::regconfig, $3, $4) RETURNING id",
        spec.name,
        spec.language,
        model,
        dim,
    )


CHUNK_COLUMNS = ["tenant_id", "id", "memory_id", "ordinal", "content", "language", "embedding"]


async def _load_tenant(
    conn: asyncpg.Connection, spec: TenantSpec, pool: SentencePool, seed: int
) -> uuid.UUID:
    tenant = await _create_tenant(conn, spec)
    rng = np.random.default_rng(seed)
    memories, chunks, used = [], [], set()
    for content, vector, sentences, sources in _chunks(pool, spec.chunks, rng):
        memory = uuid.uuid4()
        sha = hashlib.sha256(content.encode()).digest()
        memories.append((tenant, memory, content, sha, mentions_time(content)))
        chunk = uuid.uuid4()
        chunks.append(
            (tenant, chunk, memory, 0, content, spec.language, vector, sentences, sources)
        )
        used |= sources
    entity_ids = {source: uuid.uuid4() for source in sorted(used)}
    entities = [
        (tenant, entity_ids[s], pool.titles[s][:300], normalise_name(pool.titles[s]))
        for s in entity_ids
    ]
    entities = [e for e in entities if e[3]]
    named = {e[1] for e in entities}
    await conn.copy_records_to_table(
        "memories",
        records=memories,
        columns=["tenant_id", "id", "content", "content_sha256", "states_time"],
    )
    # regconfig has no binary COPY format: stage the rows, then one INSERT into chunks
    await conn.copy_records_to_table(
        "scale_chunks",
        records=[c[:7] for c in chunks],
        columns=CHUNK_COLUMNS,
    )
    await conn.execute(
        "INSERT INTO chunks (tenant_id, id, memory_id, ordinal, content, language, embedding) "
        "SELECT tenant_id, id, memory_id, ordinal, content, language::regconfig, embedding "
        "FROM scale_chunks; TRUNCATE scale_chunks"
    )
    await conn.copy_records_to_table(
        "chunk_sentences",
        records=[(c[0], c[1], c[7]) for c in chunks],
        columns=["tenant_id", "chunk_id", "vectors"],
    )
    await conn.copy_records_to_table(
        "entities",
        records=[(*e, ENTITY_CLASS) for e in entities],
        columns=["tenant_id", "id", "name", "norm_name", "entity_class"],
    )
    await conn.copy_records_to_table(
        "entity_names",
        records=[(e[0], e[1], e[3], False) for e in entities],
        columns=["tenant_id", "entity_id", "norm_name", "is_alias"],
    )
    mentions = [
        (tenant, c[2], entity_ids[s], "gazetteer")
        for c in chunks
        for s in c[8]
        if entity_ids[s] in named
    ]
    await conn.copy_records_to_table(
        "mentions", records=mentions, columns=["tenant_id", "memory_id", "entity_id", "method"]
    )
    return tenant


async def bulk_load(
    url: str,
    tenants: list[TenantSpec],
    pool: SentencePool,
    progress=None,
    maintenance_work_mem: str = "1GB",
) -> tuple[dict[str, uuid.UUID], dict[str, float]]:
    """Load every tenant, HNSW index dropped meanwhile; ({name: id}, seconds per phase).
    ``maintenance_work_mem``: the index build's memory (an HNSW graph that outgrows it is
    built on disk, several times slower)."""
    conn = await asyncpg.connect(owner_dsn(url))
    try:
        await register_vector(conn)
        index_sql = await conn.fetchval(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'chunks_embedding'"
        )
        await conn.execute("DROP INDEX IF EXISTS chunks_embedding")
        await conn.execute(
            "CREATE TEMP TABLE scale_chunks (tenant_id uuid, id uuid, memory_id uuid, ordinal int, "
            "content text, language text, embedding vector)"
        )
        await conn.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
        started = time.perf_counter()
        ids = {}
        for i, spec in enumerate(tenants):
            async with conn.transaction():
                ids[spec.name] = await _load_tenant(conn, spec, pool, seed=1000 + i)
            if progress is not None:
                progress(spec.chunks)
        loaded = time.perf_counter()
        await conn.execute(index_sql)
        indexed = time.perf_counter()
        # what an operator runs after a bulk load: planner statistics, and the visibility map
        # that lets the postings' index-only scans skip the heap (else autovacuum does it in
        # the middle of the measurements)
        await conn.execute(f"VACUUM (ANALYZE) {', '.join(RECALL_TABLES)}")
        vacuumed = time.perf_counter()
    finally:
        await conn.close()
    return ids, {
        "copy_s": round(loaded - started, 1),
        "hnsw_build_s": round(indexed - loaded, 1),
        "vacuum_analyze_s": round(vacuumed - indexed, 1),
    }
