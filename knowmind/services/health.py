"""How the server is doing: health per component, readiness, tenant stats, the graph mirror's
lag and the capabilities of this host (``GET /v1/capabilities``). Nothing here is aspirational:
each entry is read from the running parts, with the reason when something is missing.

The service is handed the parts it reports on, never the whole runtime.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import structlog

from knowmind.answer.methods import METHOD_NAMES
from knowmind.db.engine import Database
from knowmind.db.migrate import head_revision, revision_of
from knowmind.graph.base import GraphReader
from knowmind.ingest.ner import SPACY_MODEL, spacy_recogniser
from knowmind.models.executor import EmbeddingExecutor
from knowmind.models.llm_factory import LLM_PROVIDERS
from knowmind.recall.pipeline import RecallPipeline
from knowmind.recall.rerank import RerankStep
from knowmind.services.auth import Principal, tenant_of
from knowmind.store.jobs import job_backlog
from knowmind.store.outbox import outbox_lag
from knowmind.store.stats import ping, tenant_stats
from knowmind.store.tenant_index import list_tenant_indexes
from knowmind.workers.mirror import MirrorDrainer

__all__ = ["HealthService", "HostFacts", "WarmUp"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class HostFacts:
    """The configured names capabilities report beside what is running."""

    embedder_spec: str
    extractors: tuple[str, ...]
    llm_provider: str = "none"  # the provider running ("embedded", "openai") or "none"
    llm_model: str | None = None
    llm_configured: str = "none"  # KNOWMIND_LLM_PROVIDER
    llm_reason: str | None = None  # why there is none
    sentence_vectors: bool = True  # the extraction job embeds each chunk's sentences


class WarmUp:
    """The first calls of a model are slow (allocation, paging the weights in): one query and
    one passage through the embedder, then one scored pair through the reranker when one is
    configured, before ``/ready`` says ready."""

    def __init__(self, embedder: EmbeddingExecutor, rerank: RerankStep) -> None:
        self.embedder = embedder
        self.rerank = rerank
        self._task: asyncio.Task[None] | None = None

    def start(
        self, reranker_loading: asyncio.Task[None], then: Callable[[], None] | None = None
    ) -> asyncio.Task[None]:
        """``then``: called once the models are warm, before ``/ready`` says ready."""
        self._task = asyncio.create_task(self._run(reranker_loading, then), name="knowmind-warmup")
        return self._task

    async def _run(
        self, reranker_loading: asyncio.Task[None], then: Callable[[], None] | None
    ) -> None:
        started = time.perf_counter()
        await self.embedder.embed_queries(["warm-up"])
        await self.embedder.embed_passages(["warm-up"])
        if self.rerank.configured:
            try:  # a reranker that fails is a degradation each recall reports, not unreadiness
                await reranker_loading
                await self.rerank.warm_up()
            except Exception:
                log.exception("reranker.warm_up_failed")
        if then is not None:
            then()
        log.info("models.warm", seconds=round(time.perf_counter() - started, 2))

    async def wait(self) -> None:
        """Until the warm-up has ended (however it ended: ``state`` says how)."""
        if self._task is not None:
            await asyncio.wait({self._task})

    def state(self) -> str:
        """ "ok", "warming up", "not started" or why the warm-up failed."""
        if self._task is None:
            return "not started"
        if not self._task.done():
            return "warming up"
        if self._task.cancelled():
            return "warm-up cancelled"
        error = self._task.exception()
        return "ok" if error is None else f"warm-up failed: {type(error).__name__}"


class HealthService:
    def __init__(
        self,
        db: Database,
        embedder: EmbeddingExecutor,
        pipeline: RecallPipeline,
        graph_reader: GraphReader,
        mirror: MirrorDrainer | None,
        facts: HostFacts,
        jobs_running: Callable[[], bool] = lambda: False,
        warmup: WarmUp | None = None,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.pipeline = pipeline
        self.rerank = pipeline.rerank
        self.graph_reader = graph_reader
        self.mirror = mirror
        self.facts = facts
        self.jobs_running = jobs_running
        self.warmup = warmup

    async def stats(self, who: Principal) -> dict[str, object]:
        """Counts for the caller's tenant, and how far the graph mirror lags behind."""
        tenant = tenant_of(who)
        async with self.db.tenant_tx(tenant) as conn:
            counts: dict[str, object] = dict(await tenant_stats(conn, tenant))
        if self.mirror is not None:
            async with self.db.owner_tx() as conn:
                pending, oldest = await outbox_lag(conn, tenant)
            counts["mirror_lag"] = {"pending_changes": pending, "oldest_change_age_s": oldest}
        return counts

    async def health_detail(self, tenant: UUID | None = None) -> dict[str, object]:
        """A status per component: postgres, graph mirror, embedder, reranker, job worker.
        With ``tenant`` (a tenant's token asks, e.g. MCP's health tool) the job backlog is that
        tenant's and the mirror shows its status only: nothing about other tenants' activity."""
        checks = await self.readiness()
        backlog: dict[str, object] = {"backlog": "unknown: database unavailable"}
        mirror: dict[str, object] = {"status": "unknown: database unavailable"}
        if checks["database"] == "ok":  # the report itself must not fail with the database
            try:
                if tenant is None:
                    async with self.db.owner_tx() as conn:
                        backlog = dict(await job_backlog(conn))
                    mirror = await self.mirror_report()
                else:
                    async with self.db.tenant_tx(tenant) as conn:
                        backlog = dict(await job_backlog(conn, tenant))
                    # its status only: no query of every tenant's outbox for one tenant's view
                    mirror = {"status": self.mirror.status if self.mirror else "disabled"}
            except Exception as exc:
                backlog = {"backlog": f"unknown: {type(exc).__name__}"}
        return {
            "postgres": {"status": checks["database"], "schema": checks["schema"]},
            "graph_mirror": mirror,
            "embedder": {"status": checks["embedder"], "model": self.embedder.model_id},
            "reranker": self._reranker_health(),
            "job_worker": {
                "status": "ok" if self.jobs_running() else "not running in this process",
                **backlog,
            },
        }

    def _reranker_health(self) -> dict[str, object]:
        status = self.rerank.status()
        if not status.configured:
            return {"status": "disabled", "reason": status.reason}
        if status.loading:
            return {"status": "loading"}
        return {"status": "ok" if status.active else "unavailable", "reason": status.reason}

    async def mirror_report(self) -> dict[str, object]:
        """The mirror's state and lag (changes not yet in Neo4j, age of the oldest)."""
        if self.mirror is None:
            return {"status": "disabled"}
        async with self.db.owner_tx() as conn:
            pending, oldest = await outbox_lag(conn)
        status = self.mirror.status
        return {
            "status": "ok" if status.connected and not status.last_error else "degraded",
            "pending_changes": pending,
            "oldest_change_age_s": round(oldest, 3),
            "last_error": status.last_error,
        }

    async def readiness(self) -> dict[str, str]:
        """Per component: "ok" or what is wrong."""
        checks: dict[str, str] = {}
        try:
            async with self.db.app.connect() as conn:
                await ping(conn)
            checks["database"] = "ok"
        except Exception as exc:
            checks["database"] = f"unreachable: {type(exc).__name__}"
        try:
            async with self.db.owner.connect() as conn:
                revision = await revision_of(conn)
            head = head_revision()
            checks["schema"] = "ok" if revision == head else f"at {revision}, head is {head}"
        except Exception as exc:
            checks["schema"] = f"unknown: {type(exc).__name__}"
        if self.embedder.dim <= 0:
            checks["embedder"] = "not loaded"
        else:  # ready once the models are warm (no warm-up configured: loaded is enough)
            checks["embedder"] = self.warmup.state() if self.warmup else "ok"
        return checks

    async def capabilities(self) -> dict[str, Any]:
        """What is active on this host: embedder, reranker, graph backend, NER, stages, tenants
        with their own vector index."""
        extractors = list(self.facts.extractors)
        return {
            "embedder": {
                "backend": self.facts.embedder_spec.split(":", 1)[0],
                "model": self.embedder.model_id,
                "dim": self.embedder.dim,
            },
            "ranker": self._ranker_capability(),
            "reranker": self._reranker_capability(),
            "graph": {
                "backend": self.graph_reader.name,
                "gds": await self._gds(),
                "mirror": await self.mirror_report(),
            },
            "ner": {"rules": "ner" in extractors, "spacy": _spacy("ner" in extractors)},
            "extraction": {
                "extractors": extractors,
                "llm": self._llm_extraction(),
                "sentence_vectors": self.facts.sentence_vectors,
            },
            "llm": {
                "active": self.facts.llm_provider != "none",
                "configured": self.facts.llm_configured,
                "provider": self.facts.llm_provider,
                "providers": sorted(LLM_PROVIDERS),
                "model": self.facts.llm_model,
                "reason": self.facts.llm_reason,
            },
            "answer": {
                "methods": list(METHOD_NAMES),
                "enhancers": ["compress", "parent_context", "rerank"],
                "generation": self.facts.llm_provider != "none",
                "summary_trees": self.facts.llm_provider != "none",
                "unavailable": (
                    {}
                    if self.facts.llm_provider != "none"
                    else {"raptor": "no language model to build summary trees"}
                ),
            },
            "stages": list(self.pipeline.stages),
            "vector": await self._vector_indexes(),
            "fusion": {
                "method": self.pipeline.fusion,
                "k": self.pipeline.rrf_k,
                "weights": self.pipeline.default_weights,
            },
        }

    def _llm_extraction(self) -> dict[str, Any]:
        """The LLM graph extractor: on when KNOWMIND_EXTRACTORS names it (the server does not
        start without a language model then); it asks each tenant's model."""
        if "llm" not in self.facts.extractors:
            return {
                "active": False,
                "model": None,
                "reason": "llm is not in KNOWMIND_EXTRACTORS",
            }
        if self.facts.llm_provider == "none":
            return {"active": False, "model": None, "reason": self.facts.llm_reason}
        return {"active": True, "model": self.facts.llm_model, "reason": None}

    def _ranker_capability(self) -> dict[str, Any]:
        """The ranker every recall gets unless it asks for another, and why not when it
        cannot run (recalls then keep the fused order and say so)."""
        ranker, reason = self.pipeline.ranker_for(None)
        return {
            "configured": self.pipeline.ranker_name,
            "active": ranker.name,
            "description": ranker.description,
            "reason": reason,
            "cross_encoder_after": self.rerank.status().active,
        }

    def _reranker_capability(self) -> dict[str, Any]:
        status = self.rerank.status()
        return {
            "active": status.active,
            "configured": status.configured,  # off under `auto` without weights: no degradation
            "mode": "auto" if self.rerank.auto else "named",
            "backend": status.backend,
            "model": status.model,
            "candidates": status.candidates,
            "reason": status.reason,
        }

    async def _vector_indexes(self) -> dict[str, int]:
        """Tenants with an HNSW index of their own (valid ones; a build may be under way)."""
        async with self.db.owner_tx() as conn:
            indexes = await list_tenant_indexes(conn)
        valid = sum(1 for index in indexes if index.valid)
        return {"tenant_indexes": valid, "tenant_indexes_invalid": len(indexes) - valid}

    async def _gds(self) -> bool | None:
        has_gds = getattr(self.graph_reader, "has_gds", None)
        return await has_gds() if has_gds else None


def _spacy(ner_on: bool) -> dict[str, Any]:
    """spaCy reads English tenants' text when the ``ner`` extractor is on and it is installed."""
    if not ner_on:
        return {"active": False, "reason": "ner is not in KNOWMIND_EXTRACTORS"}
    recogniser = spacy_recogniser()
    if recogniser is None:
        return {"active": False, "reason": f"spaCy or {SPACY_MODEL} not installed"}
    return {"active": True, "model": SPACY_MODEL, "languages": ["english"]}
