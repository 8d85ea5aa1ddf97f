"""The embedding queue is shared fairly between tenants, bounded, and forgets abandoned work:
scheduling checked with a recording embedder double (unit tests; the real model's vectors are
checked in test_ingest_and_embedding)."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from knowmind.models.executor import EmbeddingExecutor, QueueFull


class RecordingEmbedderDouble:
    """Returns a vector per text (its number) and records every batch it was given."""

    model_id, dim = "double", 1

    def __init__(self, seconds_per_batch: float = 0.005) -> None:
        self.batches: list[list[str]] = []
        self.seconds = seconds_per_batch

    def embed_passages(self, texts):
        self.batches.append(list(texts))
        time.sleep(self.seconds)
        return np.array([[float(t.split("-")[1])] for t in texts], dtype=np.float32)

    embed_queries = embed_passages


async def test_a_small_write_waits_a_batch_not_a_large_upload():
    model = RecordingEmbedderDouble()
    executor = EmbeddingExecutor(model, max_batch=8)
    try:
        large = asyncio.ensure_future(executor.embed_passages([f"a-{i}" for i in range(200)], "A"))
        await asyncio.sleep(0.02)  # A's upload is under way
        before = len(model.batches)
        small = await executor.embed_passages(["b-7"], "B")
        assert not large.done()
        assert small.tolist() == [[7.0]]
        arrived = next(i for i, batch in enumerate(model.batches) if "b-7" in batch)
        assert before > 0 and arrived <= before + 1  # the batch running, then B's turn
        vectors = await large
    finally:
        await executor.close()
    assert vectors[:, 0].tolist() == list(range(200))  # slices reassembled in order
    assert sum(len(b) for b in model.batches) == 201


async def test_owners_share_each_batch():
    model = RecordingEmbedderDouble()
    executor = EmbeddingExecutor(model, max_batch=8)
    try:
        await asyncio.gather(
            executor.embed_passages([f"a-{i}" for i in range(40)], "A"),
            executor.embed_passages([f"b-{i}" for i in range(40)], "B"),
        )
    finally:
        await executor.close()
    mixed = [b for b in model.batches if any(t.startswith("a") for t in b)]
    assert all(sum(t.startswith("b") for t in b) == 4 for b in mixed[:8])


async def test_full_queues_refuse_at_once():
    executor = EmbeddingExecutor(
        RecordingEmbedderDouble(0.05), max_batch=4, max_owner_texts=50, max_queued_texts=70
    )
    try:
        first = asyncio.ensure_future(executor.embed_passages([f"a-{i}" for i in range(40)], "A"))
        await asyncio.sleep(0)
        with pytest.raises(QueueFull) as tenant_full:
            await executor.embed_passages([f"a-{i}" for i in range(20)], "A")
        assert not tenant_full.value.whole and tenant_full.value.retry_after_s > 0
        second = asyncio.ensure_future(executor.embed_passages([f"b-{i}" for i in range(20)], "B"))
        await asyncio.sleep(0)
        with pytest.raises(QueueFull) as server_full:
            await executor.embed_passages([f"c-{i}" for i in range(20)], "C")
        assert server_full.value.whole
        await asyncio.gather(first, second)
        assert executor.waiting_passages() == {}
        await executor.embed_passages([f"c-{i}" for i in range(20)], "C")  # room again
    finally:
        await executor.close()


async def test_abandoned_work_is_dropped():
    model = RecordingEmbedderDouble(0.01)
    executor = EmbeddingExecutor(model, max_batch=4)
    try:
        upload = asyncio.ensure_future(executor.embed_passages([f"a-{i}" for i in range(400)], "A"))
        await asyncio.sleep(0.05)
        upload.cancel()  # the client went away
        await executor.embed_passages(["b-1"], "B")
        await asyncio.sleep(0.05)
        embedded = sum(len(b) for b in model.batches)
        assert embedded < 100
        assert executor.waiting_passages() == {}
    finally:
        await executor.close()


async def test_batches_are_bounded_by_characters_too():
    """Long chunks make short batches: what waits behind a batch waits for a bounded time."""
    model = RecordingEmbedderDouble(0)
    executor = EmbeddingExecutor(model, max_batch=32, max_batch_chars=6000)
    long_texts = [f"a-{i}-" + "x" * 2500 for i in range(10)]
    try:
        vectors = await executor.embed_passages(long_texts, "A")
        await executor.embed_passages([f"b-{i}" for i in range(40)], "B")
    finally:
        await executor.close()
    assert vectors[:, 0].tolist() == list(range(10))
    assert [len(b) for b in model.batches] == [2, 2, 2, 2, 2, 32, 8]


async def test_with_a_query_model_queries_never_wait_behind_passages():
    passages_model, query_model = RecordingEmbedderDouble(0.3), RecordingEmbedderDouble(0)
    executor = EmbeddingExecutor(passages_model, max_batch=4, query_embedder=query_model)
    try:
        upload = asyncio.ensure_future(executor.embed_passages([f"a-{i}" for i in range(8)], "A"))
        await asyncio.sleep(0.05)  # a 0.3 s passage batch is under way
        started = time.perf_counter()
        vector = await executor.embed_queries(["q-5"])
        waited = time.perf_counter() - started
        assert not upload.done()
        await upload
    finally:
        await executor.close()
    assert vector.tolist() == [[5.0]] and waited < 0.15
    assert query_model.batches == [["q-5"]]
    assert all(not t.startswith("q") for b in passages_model.batches for t in b)


async def test_with_a_query_model_a_small_write_passes_another_owners_batch():
    """B's sentence runs on the idle query model's thread while A's batch is under way; A's
    own small job, C's larger one, and D's while a query holds that thread queue as before."""
    passages_model, query_model = RecordingEmbedderDouble(0.3), RecordingEmbedderDouble(0.1)
    executor = EmbeddingExecutor(passages_model, max_batch=4, query_embedder=query_model)
    try:
        upload = asyncio.ensure_future(executor.embed_passages([f"a-{i}" for i in range(8)], "A"))
        await asyncio.sleep(0.05)  # a 0.3 s batch of A's is under way
        started = time.perf_counter()
        small = await executor.embed_passages(["b-7"], "B")
        waited = time.perf_counter() - started
        assert not upload.done()
        queued = [
            asyncio.ensure_future(executor.embed_passages(["a-20"], "A")),  # the batch's owner
            asyncio.ensure_future(executor.embed_passages([f"c-{i}" for i in range(30, 35)], "C")),
        ]
        busy = asyncio.ensure_future(executor.embed_queries(["q-9"]))
        await asyncio.sleep(0)  # the query holds the query model's thread
        queued.append(asyncio.ensure_future(executor.embed_passages(["d-40"], "D")))
        vectors = await asyncio.gather(upload, busy, *queued)
    finally:
        await executor.close()
    assert small.tolist() == [[7.0]] and waited < 0.25
    assert query_model.batches == [["b-7"], ["q-9"]]
    on_model_thread = {t for batch in passages_model.batches for t in batch}
    assert {"a-20", "c-30", "c-34", "d-40"} <= on_model_thread and "b-7" not in on_model_thread
    assert vectors[0][:, 0].tolist() == list(range(8))


async def test_passage_batches_shorten_while_recalls_are_served_even_beside_a_query_model():
    """A lone owner's batches take ``max_batch_chars``; after a query (answered by the query
    model, on its own thread) they take the shared budget while recalls are being served."""
    passages_model, query_model = RecordingEmbedderDouble(0), RecordingEmbedderDouble(0)
    executor = EmbeddingExecutor(
        passages_model, max_batch=32, max_batch_chars=4000, query_embedder=query_model
    )
    texts = [f"a-{i}-" + "x" * 490 for i in range(16)]  # ≈ 500 characters each
    try:
        await executor.embed_passages(texts, "A")
        alone = [len(b) for b in passages_model.batches]
        passages_model.batches.clear()
        await executor.embed_queries(["q-1"])
        await executor.embed_passages(texts, "A")
    finally:
        await executor.close()
    assert alone == [8, 8]  # 4,000 characters
    assert [len(b) for b in passages_model.batches] == [2] * 8  # 1,000 characters
    assert query_model.batches == [["q-1"]]
