"""Async front of an embedder: one worker thread, queued requests merged into batches.

Embedding models on CPU degrade badly when several calls run in parallel threads (they fight for
the same cores), so every embedding in the process goes through one thread (whose model uses the
process's cores); the reranker runs its batches on the same thread (``model_thread``), so the two
models never compete for the cores either. Queries are served before passages, and passage work
is cut into slices, so a large ingest never holds a recall's query embedding for long.

Fairness and admission: passage work is queued per owner (a tenant) and each batch is shared
round-robin among the owners waiting, so one tenant's large upload delays another's sentence by
the batch under way and a shared one, not by the upload; batches are short (characters) while
several owners wait or recalls are being served. With a query model, a small job (a sentence or
a few) of another owner does not even wait for the batch under way: it runs on the query
model's thread when that is idle (sharing the cores, as a query does). At most
``max_owner_texts`` passages may wait per owner and ``max_queued_texts`` in all: beyond, a
submission is refused at once (``QueueFull``) rather than queued for minutes. Work whose caller
went away (its future cancelled) is dropped.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from knowmind.errors import OverloadedError
from knowmind.models.base import Embedder

__all__ = ["MAX_BATCH", "EmbeddingExecutor", "QueueFull"]


@dataclass(slots=True)
class _Job:
    texts: list[str]
    future: asyncio.Future[np.ndarray]
    is_query: bool
    owner: str = ""
    done_rows: int = 0
    parts: list[np.ndarray] = field(default_factory=list)

    @property
    def remaining(self) -> int:
        return len(self.texts) - self.done_rows


class QueueFull(OverloadedError):
    """Passages refused: the owner's share (``whole`` False: 429) or the whole queue (503)."""

    def __init__(self, whole: bool, waiting: int, retry_after_s: float) -> None:
        scope = "the server's embedding queue" if whole else "this tenant's embedding queue"
        message = f"{scope} is full ({waiting} passages waiting); retry later"
        super().__init__(message, whole_server=whole, retry_after_s=retry_after_s)

    @property
    def whole(self) -> bool:
        return self.status_code == 503


# Texts per model call: the batch the model thread embeds at once, and its characters: what
# arrives waits for the batch under way (a 1,000-character chunk takes ~0.1-0.25 s here), so
# batches are short while several tenants wait or recalls are being served (SHARED_BATCH_CHARS),
# and longer only for one tenant's work on an otherwise quiet server: through the batch service
# 0.90 of the bare model's rate at 4,000 characters against 0.84-0.87 at 2,000. (Before queries
# answered by the query model counted as recalls being served, batches stayed long beside them:
# another tenant's recall under a bulk import took 30.1 ms p50 at 4,000 characters, 22.9 at
# 2,000; with them counted, 23.3 at 4,000.)
MAX_BATCH = 32
MAX_BATCH_CHARS = 4000
SHARED_BATCH_CHARS = 1000
# A job this small (texts, characters: no more than a shared batch) may pass by another
# owner's batch on the query model's thread.
PASS_BY_TEXTS = 4
PASS_BY_CHARS = SHARED_BATCH_CHARS
# A query this recent means recalls are being served.
_QUERY_RECENT_S = 2.0
# Passages that may wait, per owner and in all (at ~30 passages/s: about 30 s and 2 min).
MAX_OWNER_TEXTS = 1000
MAX_QUEUED_TEXTS = 4000
# Seconds a refused caller is told to wait per 100 passages queued ahead of it.
_RETRY_S_PER_100 = 3.0


class EmbeddingExecutor:
    def __init__(
        self,
        embedder: Embedder,
        max_batch: int = MAX_BATCH,
        max_batch_chars: int = MAX_BATCH_CHARS,
        max_owner_texts: int = MAX_OWNER_TEXTS,
        max_queued_texts: int = MAX_QUEUED_TEXTS,
        query_embedder: Embedder | None = None,
    ) -> None:
        self.embedder = embedder
        # a second instance of the model for queries, on a thread of its own: a recall's query
        # then never waits behind a passage batch (it shares the cores instead)
        self._query_model = (
            None
            if query_embedder is None
            else (query_embedder, ThreadPoolExecutor(1, thread_name_prefix="knowmind-query"))
        )
        self.max_batch, self.max_batch_chars = max_batch, max_batch_chars
        self._last_query_at = float("-inf")
        self.max_owner_texts, self.max_queued_texts = max_owner_texts, max_queued_texts
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowmind-embed")
        self._inbox: asyncio.Queue[_Job] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._waiting: dict[str, int] = {}  # passages submitted and not yet embedded, per owner
        self._batch_owners: frozenset[str] = frozenset()  # owners of the passage batch under way
        self._on_query_thread = 0  # calls given to the query model's thread and not yet done

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
        # recalls are being served: passage batches stay short (on a shared model a query
        # waits for the batch under way; beside a query model the batch competes for the cores)
        self._last_query_at = time.monotonic()
        if self._query_model is not None and texts:
            return await self._query_thread_call(self._query_model[0].embed_queries, texts)
        return await self._submit(texts, is_query=True)

    async def embed_passages(self, texts: Sequence[str], owner: str = "") -> np.ndarray:
        """``owner`` (a tenant) shares the passage queue fairly with the other owners; raises
        ``QueueFull`` when its share or the whole queue is full."""
        self._admit(owner, len(texts))
        if self._query_model is not None and self._may_pass_by(owner, texts):
            return await self._query_thread_call(self._query_model[0].embed_passages, texts)
        return await self._submit(texts, is_query=False, owner=owner)

    def _may_pass_by(self, owner: str, texts: Sequence[str]) -> bool:
        """A small job of an owner with nothing queued, while the model thread runs a batch of
        other owners only and the query model's thread is idle: it runs there at once instead
        of waiting for that batch (a one-sentence write need not wait for a bulk import)."""
        return (
            0 < len(texts) <= PASS_BY_TEXTS
            and sum(map(len, texts)) <= PASS_BY_CHARS
            and self._on_query_thread == 0
            and bool(self._batch_owners)
            and owner not in self._batch_owners
            and not self._waiting.get(owner)
        )

    async def _query_thread_call(
        self, fn: Callable[[list[str]], np.ndarray], texts: Sequence[str]
    ) -> np.ndarray:
        assert self._query_model is not None
        loop = asyncio.get_running_loop()
        self._on_query_thread += 1
        try:
            vectors = await loop.run_in_executor(self._query_model[1], fn, list(texts))
        finally:
            self._on_query_thread -= 1
        return np.asarray(vectors, dtype=np.float32)

    def waiting_passages(self) -> dict[str, int]:
        """Passages waiting per owner (for health reports and tests)."""
        return {owner: n for owner, n in self._waiting.items() if n}

    def _admit(self, owner: str, count: int) -> None:
        total = sum(self._waiting.values())
        mine = self._waiting.get(owner, 0)
        # one oversized request alone is admitted (the body limit bounds it); more queue up
        if mine and mine + count > self.max_owner_texts:
            raise QueueFull(False, mine, _RETRY_S_PER_100 * mine / 100)
        if total and total + count > self.max_queued_texts:
            raise QueueFull(True, total, _RETRY_S_PER_100 * total / 100)

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        self._thread.shutdown(wait=False, cancel_futures=True)
        if self._query_model is not None:
            self._query_model[1].shutdown(wait=False, cancel_futures=True)

    async def _submit(self, texts: Sequence[str], *, is_query: bool, owner: str = "") -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        loop = asyncio.get_running_loop()
        if self._worker is None or self._worker.done():
            self._inbox = asyncio.Queue()
            self._worker = loop.create_task(self._run(), name="knowmind-embed-worker")
        assert self._inbox is not None
        job = _Job(list(texts), loop.create_future(), is_query, owner)
        if not is_query:
            self._waiting[owner] = self._waiting.get(owner, 0) + len(job.texts)
        self._inbox.put_nowait(job)
        return await job.future

    async def _run(self) -> None:
        assert self._inbox is not None
        queries: deque[_Job] = deque()
        passages: OrderedDict[str, deque[_Job]] = OrderedDict()  # per owner, in turn
        while True:
            if not queries and not passages:
                self._file(await self._inbox.get(), queries, passages)
            while not self._inbox.empty():
                self._file(self._inbox.get_nowait(), queries, passages)
            self._drop_abandoned(passages)
            if queries:
                chars = self.max_batch_chars
                await self._run_one_batch(self._slices([queries], self.max_batch, chars), True)
            elif passages:
                await self._run_one_batch(self._fair_slices(passages), False)
            _prune(queries, passages)

    @staticmethod
    def _file(job: _Job, queries: deque[_Job], passages: OrderedDict[str, deque[_Job]]) -> None:
        if job.is_query:
            queries.append(job)
        else:
            passages.setdefault(job.owner, deque()).append(job)

    def _drop_abandoned(self, passages: OrderedDict[str, deque[_Job]]) -> None:
        """Jobs whose caller went away (future cancelled) are not embedded."""
        for owner in list(passages):
            for job in [j for j in passages[owner] if j.future.done()]:
                passages[owner].remove(job)
                self._settle(job)
            if not passages[owner]:
                del passages[owner]

    def _fair_slices(self, passages: OrderedDict[str, deque[_Job]]) -> list[tuple[_Job, int, int]]:
        """A batch shared among the waiting owners, each up to an equal share (a lone owner
        fills the batch); the owner served first goes to the back of the line. Shares left
        unused stay unused: a small write's batch is then smaller, so it is done sooner."""
        share = max(1, self.max_batch // len(passages))
        shared = len(passages) > 1 or time.monotonic() - self._last_query_at < _QUERY_RECENT_S
        chars = min(self.max_batch_chars, SHARED_BATCH_CHARS) if shared else self.max_batch_chars
        taken = self._slices(list(passages.values()), share, chars)
        passages.move_to_end(next(iter(passages)))
        return taken

    def _slices(
        self, queues: list[deque[_Job]], per_queue: int, max_chars: int
    ) -> list[tuple[_Job, int, int]]:
        """Up to ``per_queue`` texts from the head of each queue, in order: at most
        ``max_batch`` texts and ``max_chars`` characters in all (a batch is the time anything
        else waits for the model: 32 chunks of 1,000 characters take seconds)."""
        texts = chars = 0
        taken: list[tuple[_Job, int, int]] = []
        for queue in queues:
            budget = per_queue
            for job in queue:
                start = end = job.done_rows
                while end < len(job.texts) and budget > 0 and texts < self.max_batch:
                    size = len(job.texts[end])
                    if texts and chars + size > max_chars:
                        break
                    end, budget, texts, chars = end + 1, budget - 1, texts + 1, chars + size
                if end > start:
                    taken.append((job, start, end))
                if end < len(job.texts):
                    break  # this queue's budget, or the batch, is used up
        return taken

    async def _run_one_batch(self, taken: list[tuple[_Job, int, int]], is_query: bool) -> None:
        """Embed the slices in one model call; finish the jobs they complete."""
        if not taken:
            return
        texts = [t for job, start, end in taken for t in job.texts[start:end]]
        fn = self.embedder.embed_queries if is_query else self.embedder.embed_passages
        loop = asyncio.get_running_loop()
        self._batch_owners = frozenset(() if is_query else (job.owner for job, _, _ in taken))
        try:
            vectors = await loop.run_in_executor(self._thread, fn, texts)
        except Exception as exc:  # the model failed: every job in this batch fails with it
            for job in {id(j): j for j, _, _ in taken}.values():
                self._finish(job, exc)
            return
        finally:
            self._batch_owners = frozenset()
        offset = 0
        for job, start, end in taken:
            job.parts.append(vectors[offset : offset + (end - start)])
            offset += end - start
            job.done_rows = end
            if not is_query and job.owner in self._waiting:
                self._waiting[job.owner] -= end - start
            if end == len(job.texts):
                self._finish(job, None)

    def _finish(self, job: _Job, error: Exception | None) -> None:
        if not job.future.done():
            if error is None:
                job.future.set_result(np.concatenate(job.parts))
            else:
                job.future.set_exception(error)
        self._settle(job)

    def _settle(self, job: _Job) -> None:
        """Forget the job's remaining passages (it is done, failed or abandoned); the queues
        drop finished jobs before the next batch."""
        if not job.is_query:
            left = self._waiting.get(job.owner, 0) - job.remaining
            if left > 0:
                self._waiting[job.owner] = left
            else:
                self._waiting.pop(job.owner, None)
        job.done_rows = len(job.texts)


def _prune(queries: deque[_Job], passages: OrderedDict[str, deque[_Job]]) -> None:
    """Drop finished jobs (and owners left with none) from the queues."""
    for queue in (queries, *passages.values()):
        for job in [j for j in queue if not j.remaining]:
            queue.remove(job)
    for owner in [o for o, queue in passages.items() if not queue]:
        del passages[owner]
