"""What the scale benchmark and its replica processes share: the query-embedding switch, a warm
runtime started as ``knowmind serve`` starts one, and one sample of concurrent recalls."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchmark.cpu import CpuClock
from benchmark.runner import percentiles
from knowmind.recall.base import RecallRequest
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.settings import Settings

__all__ = ["QueryCacheEmbedder", "Sample", "sample_recalls", "warm_runtime"]


class QueryCacheEmbedder:
    """The real model behind a switch. ``cached``: query vectors computed before the run (what a
    query-embedding cache gives: the recall is pure server work); ``live``: every query is
    embedded by the model. Passages always go to the model."""

    def __init__(
        self, inner: Any, queries: Sequence[str] = (), vectors: Sequence[np.ndarray] = ()
    ) -> None:
        """``queries`` and their ``vectors``: what the ``cached`` mode answers from."""
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.mode = "live"
        self.cached: dict[str, np.ndarray] = dict(zip(queries, vectors, strict=True))

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if self.mode == "cached":
            return np.stack([self.cached[t] for t in texts])
        return np.asarray(self.inner.embed_queries(list(texts)), dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.inner.embed_passages(list(texts)), dtype=np.float32)


async def warm_runtime(settings: Settings, embedder: QueryCacheEmbedder) -> Runtime:
    """A runtime without a reranker, its models warm, started as ``knowmind serve`` starts one
    (the reranker's load freezes the start-up heap); closed again if it cannot warm up."""
    runtime = await Runtime.start(settings.with_overrides(reranker="none"), embedder)
    runtime.start_loading_reranker(freeze_heap=True)
    try:
        await runtime.wait_until_warm()
    except BaseException:
        await runtime.close()
        raise
    return runtime


@dataclass(slots=True)
class Sample:
    """What one measurement saw: its requests' latencies, each stage's timings, its length and
    the server's CPU time in it (None: not measurable here, see ``CpuClock``)."""

    wall_ms: list[float] = field(default_factory=list)
    stages: dict[str, list[float]] = field(default_factory=dict)
    elapsed_s: float = 0.0
    cpu_s: float | None = None

    def add(self, other: Sample) -> None:
        self.wall_ms += other.wall_ms
        for stage, ms in other.stages.items():
            self.stages.setdefault(stage, []).extend(ms)
        self.elapsed_s += other.elapsed_s
        if other.cpu_s is not None:
            self.cpu_s = (self.cpu_s or 0.0) + other.cpu_s

    def summary(self) -> dict[str, Any]:
        cuts = percentiles(self.wall_ms)
        n = len(self.wall_ms)
        summary = {
            "requests": n,
            "req_per_s": round(n / self.elapsed_s, 2),
            "p50_ms": cuts["p50"],
            "p95_ms": cuts["p95"],
            "stages_p50_ms": {s: percentiles(v)["p50"] for s, v in sorted(self.stages.items())},
        }
        if self.cpu_s is not None and n:
            summary["cpu_ms_per_req"] = round(self.cpu_s * 1000 / n, 2)
            summary["cores_busy"] = round(self.cpu_s / self.elapsed_s, 2)
        return summary


async def sample_recalls(
    runtime: Runtime,
    who: Principal,
    queries: list[str],
    concurrency: int,
    rounds: int,
    clock: CpuClock | None = None,
) -> Sample:
    """Every query ``rounds`` times (in turn) by ``concurrency`` clients."""
    semaphore = asyncio.Semaphore(concurrency)
    sample = Sample()

    async def one(query: str) -> None:
        async with semaphore:
            started = time.perf_counter()
            outcome = await runtime.recall.service.recall(
                who, RecallRequest(text=query, k=10, hops=2)
            )
            sample.wall_ms.append((time.perf_counter() - started) * 1000)
            for stage, ms in outcome.timings_ms.items():
                sample.stages.setdefault(stage, []).append(ms)

    cpu_before = clock.seconds() if clock else None
    started = time.perf_counter()
    await asyncio.gather(*(one(q) for q in queries * rounds))
    sample.elapsed_s = time.perf_counter() - started
    cpu_after = clock.seconds() if clock else None
    if cpu_before is not None and cpu_after is not None:
        sample.cpu_s = cpu_after - cpu_before
    return sample
