"""Re-score the fused short list with a cross-encoder, within a time budget. Without a
reranker, or when it fails or is too slow, the fused order stands and the reason is returned."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from knowmind.models.rerank import LoadedReranker, load_reranker, parse_spec
from knowmind.store.rows import ChunkHit

__all__ = ["RerankStatus", "RerankStep"]


@dataclass(frozen=True, slots=True)
class RerankStatus:
    """What the rerank step can do now: for capabilities, health and the benchmark."""

    configured: bool  # a reranker is named in the settings
    active: bool  # it loaded and reranks
    loading: bool  # it is configured and still loading
    backend: str | None
    model: str | None
    reason: str | None  # why it is not active ("loading" while it loads)
    candidates: int


log = structlog.get_logger(__name__)


class RerankStep:
    def __init__(
        self,
        spec: str = "none",
        candidates: int = 20,
        timeout_s: float = 3.0,
        loaded: LoadedReranker | None = None,
    ) -> None:
        self.spec = spec
        self.loaded = loaded  # None while the model is still loading
        self.candidates = candidates
        self.timeout_s = timeout_s
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="knowmind-rerank")

    @property
    def configured(self) -> bool:
        return self.spec != "none"

    async def load(self, threads: int) -> None:
        """Load the cross-encoder (seconds, torch) in a thread; failures become the reason."""
        self.loaded = await asyncio.to_thread(load_reranker, self.spec, threads)
        log.info("reranker.loaded", active=self.loaded.active, reason=self.loaded.reason)

    def status(self) -> RerankStatus:
        parsed = parse_spec(self.spec)
        backend, model = parsed if parsed else (None, None)
        loading = self.configured and self.loaded is None
        if self.loaded is None:
            reason: str | None = "loading" if self.configured else "no reranker configured"
        else:
            reason = self.loaded.reason
        return RerankStatus(
            configured=self.configured,
            active=bool(self.loaded and self.loaded.active),
            loading=loading,
            backend=backend,
            model=model,
            reason=reason,
            candidates=self.candidates,
        )

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
