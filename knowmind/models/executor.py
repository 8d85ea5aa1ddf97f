"""Async front of an embedder: one worker thread, queued requests merged into batches.

Embedding models on CPU degrade badly when several calls run in parallel threads (they fight for
the same cores), so every embedding in the process goes through one thread (whose model uses the
process's cores); the reranker runs its batches on the same thread (``model_thread``), so the two
models never compete for the cores either. Queries are served before passages, and passage work
is cut into slices, so a large ingest never holds a recall's query embedding for long.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from knowmind.models.base import Embedder

__all__ = ["MAX_BATCH", "EmbeddingExecutor"]


@dataclass(slots=True)
class _Job:
    texts: list[str]
    future: asyncio.Future[np.ndarray]
    is_query: bool
    done_rows: int = 0
    parts: list[np.ndarray] = field(default_factory=list)


# Texts per model call: the batch the model thread embeds at once.
MAX_BATCH = 32


class EmbeddingExecutor:
    def __init__(self, embedder: Embedder, max_batch: int = MAX_BATCH) -> None:
        self.embedder = embedder
        self.max_batch = max_batch
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowmind-embed")
        self._inbox: asyncio.Queue[_Job] | None = None
        self._worker: asyncio.Task[None] | None = None

    @property
    def model_thread(self) -> ThreadPoolExecutor:
        """The one thread CPU model work of this process runs on (shared with the reranker)."""
        return self._thread

    @property
    def model_id(self) -> str:
        return self.embedder.model_id

    @property
    def dim(self) -> int:
        return self.embedder.dim

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return await self._submit(texts, is_query=True)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return await self._submit(texts, is_query=False)

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        self._thread.shutdown(wait=False, cancel_futures=True)

    async def _submit(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done():
            self._inbox = asyncio.Queue()
            self._worker = loop.create_task(self._run(), name="knowmind-embed-worker")
        assert self._inbox is not None
        job = _Job(list(texts), loop.create_future(), is_query)
        self._inbox.put_nowait(job)
        return await job.future

    async def _run(self) -> None:
        assert self._inbox is not None
        queries: deque[_Job] = deque()
        passages: deque[_Job] = deque()
        while True:
            if not queries and not passages:
                self._file(await self._inbox.get(), queries, passages)
            while not self._inbox.empty():
                self._file(self._inbox.get_nowait(), queries, passages)
            await self._run_one_batch(queries if queries else passages)

    @staticmethod
    def _file(job: _Job, queries: deque[_Job], passages: deque[_Job]) -> None:
        (queries if job.is_query else passages).append(job)

    async def _run_one_batch(self, jobs: deque[_Job]) -> None:
        """Embed up to ``max_batch`` texts from the head of ``jobs``; finish completed jobs."""
        taken: list[tuple[_Job, int, int]] = []
        texts: list[str] = []
        for job in jobs:
            room = self.max_batch - len(texts)
            if room <= 0:
                break
            start = job.done_rows
            end = min(len(job.texts), start + room)
            taken.append((job, start, end))
            texts.extend(job.texts[start:end])
        is_query = jobs[0].is_query
        fn = self.embedder.embed_queries if is_query else self.embedder.embed_passages
        loop = asyncio.get_running_loop()
        try:
            vectors = await loop.run_in_executor(self._thread, fn, texts)
        except Exception as exc:  # the model failed: every job in this batch fails with it
            for job, _, _ in taken:
                if job in jobs:
                    jobs.remove(job)
                if not job.future.done():
                    job.future.set_exception(exc)
            return
        offset = 0
        for job, start, end in taken:
            job.parts.append(vectors[offset : offset + (end - start)])
            offset += end - start
            job.done_rows = end
            if end == len(job.texts):
                jobs.remove(job)
                if not job.future.done():
                    job.future.set_result(np.concatenate(job.parts))
