"""Re-score the fused short list with a cross-encoder, within a time budget. Without a
reranker, or when it fails or is too slow, the fused order stands and the reason is returned."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import structlog

from knowmind.models.rerank import LoadedReranker
from knowmind.store.rows import ChunkHit

__all__ = ["RerankStep"]

log = structlog.get_logger(__name__)


class RerankStep:
    def __init__(
        self,
        spec: str = "none",
        candidates: int = 20,
        timeout_s: float = 3.0,
        loaded: LoadedReranker | None = None,
        thread: ThreadPoolExecutor | None = None,
    ) -> None:
        self.spec = spec
        self.loaded = loaded  # None while the model is still loading
        self.candidates = candidates
        self.timeout_s = timeout_s
        # the embedder's model thread when given: the two models then never compete for cores
        self._thread = thread or ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="knowmind-rerank"
        )

    @property
    def configured(self) -> bool:
        return self.spec != "none"

    async def warm_up(self) -> None:
        """Score one pair on the reranker's thread (the first call is the slow one)."""
        if self.loaded is None or self.loaded.reranker is None:
            return
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._thread, self.loaded.reranker.score, "warm-up", ["warm-up"])

    async def apply(
        self, query: str, hits: list[ChunkHit], requested: bool | None
    ) -> tuple[list[int], list[float | None] | None, str | None]:
        """(new order as indexes into ``hits``, rerank score per hit or None, degraded reason)."""
        fused_order = list(range(len(hits)))
        wanted = self.configured if requested is None else requested
        if not wanted or not hits:
            return fused_order, None, None
        if self.loaded is None or self.loaded.reranker is None:
            reason = self.loaded.reason if self.loaded else "the reranker is still loading"
            return fused_order, None, f"not reranked: {reason}"
        head = hits[: self.candidates]
        passages = [f"{h.title}\n{h.content}" if h.title else h.content for h in head]
        loop = asyncio.get_running_loop()
        try:
            scores = await asyncio.wait_for(
                loop.run_in_executor(self._thread, self.loaded.reranker.score, query, passages),
                self.timeout_s,
            )
        except TimeoutError:
            return fused_order, None, f"not reranked: timed out after {self.timeout_s:g} s"
        except Exception as exc:
            log.exception("rerank.failed")
            return fused_order, None, f"not reranked: {type(exc).__name__}"
        ranked = sorted(range(len(head)), key=lambda i: -scores[i])
        order = ranked + fused_order[len(head) :]
        per_hit: list[float | None] = [*scores, *[None] * (len(hits) - len(head))]
        return order, per_hit, None
