"""Re-score the fused short list with a cross-encoder, within a time budget. Without a
reranker, or when it fails or is too slow, the fused order stands and the reason is returned."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import structlog

from knowmind.models.rerank import (
    AUTO,
    AUTO_RERANKER,
    LoadedReranker,
    load_reranker,
    parse_spec,
)
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
        thread: ThreadPoolExecutor | None = None,
        auto_spec: str = AUTO_RERANKER,
    ) -> None:
        # "auto": the default reranker if its weights are here, else off (not a degradation)
        self.auto = spec == AUTO
        self.spec = auto_spec if self.auto else spec
        self._auto_off = False
        self.loaded = loaded  # None while the model is still loading
        self.candidates = candidates
        self.timeout_s = timeout_s
        # the embedder's model thread when given: the two models then never compete for cores
        self._thread = thread or ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="knowmind-rerank"
        )

    @property
    def configured(self) -> bool:
        return self.spec != "none" and not self._auto_off

    async def load(self, threads: int) -> None:
        """Load the cross-encoder (seconds, torch) in a thread; failures become the reason.
        Under ``auto`` a reranker that cannot load is switched off: recalls are then not
        reranked unless a request asks (and that request is told it was not)."""
        loaded = await asyncio.to_thread(load_reranker, self.spec, threads)
        if self.auto and not loaded.active:
            self._auto_off = True
            loaded = LoadedReranker(loaded.spec, None, f"auto: off ({loaded.reason})")
        self.loaded = loaded
        log.info("reranker.loaded", active=loaded.active, auto=self.auto, reason=loaded.reason)

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
        # under auto, a reranker still loading may yet switch off: only a request that asks
        # for reranking is told it was not
        default = self.configured and not (self.auto and self.loaded is None)
        wanted = default if requested is None else requested
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
