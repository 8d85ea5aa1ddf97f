"""Everything a running server holds: pools, the embedder and the services built on them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import structlog
from sqlalchemy import text

from knowmind.db.engine import Database
from knowmind.db.migrate import check_embedding_model, head_revision, revision_of
from knowmind.graph.base import GraphReader
from knowmind.graph.postgres_reader import PostgresGraphReader
from knowmind.ingest.extract import EXTRACT_JOB, Extraction
from knowmind.models.base import Embedder
from knowmind.models.executor import EmbeddingExecutor
from knowmind.models.factory import build_embedder
from knowmind.models.language import language_detector
from knowmind.models.rerank import load_reranker
from knowmind.recall.bm25 import LexicalOptions, OkapiBM25Stage
from knowmind.recall.graph import GraphStage
from knowmind.recall.identity import IdentityStage
from knowmind.recall.pipeline import RecallPipeline
from knowmind.recall.rerank import RerankStep
from knowmind.recall.vector import VectorStage
from knowmind.services.admin import AdminService
from knowmind.services.auth import Principal, tenant_of
from knowmind.services.documents import DocumentService
from knowmind.services.erasure import ErasureService
from knowmind.services.graph import GraphService
from knowmind.services.memories import MemoryService
from knowmind.services.recall import RecallService
from knowmind.settings import Settings
from knowmind.store.jobs import job_backlog
from knowmind.store.outbox import outbox_lag
from knowmind.store.stats import tenant_stats
from knowmind.workers.jobs import JobWorker
from knowmind.workers.mirror import MirrorDrainer


def graph_reader(db: Database, settings: Settings) -> GraphReader:
    if settings.graph_backend == "neo4j":
        from knowmind.graph.neo4j_reader import Neo4jGraphReader

        assert settings.neo4j_url
        return Neo4jGraphReader(settings.neo4j_url, settings.neo4j_user, settings.neo4j_password)
    return PostgresGraphReader(db)


def lexical_stage(settings: Settings) -> OkapiBM25Stage:
    options = LexicalOptions(
        k1=settings.bm25_k1,
        b=settings.bm25_b,
        postings_budget=settings.bm25_postings_budget,
        typos=settings.bm25_typos == "on",
        compounds=settings.bm25_compounds == "on",
        query_language=settings.bm25_query_language == "on",
    )
    return OkapiBM25Stage(options, language_detector() if options.query_language else None)


def mirror_drainer(db: Database, settings: Settings) -> MirrorDrainer | None:
    if not settings.neo4j_url:
        return None
    from knowmind.graph.neo4j_mirror import Neo4jMirror

    url, user, password = settings.neo4j_url, settings.neo4j_user, settings.neo4j_password

    async def connect() -> Neo4jMirror:
        return await Neo4jMirror.connect(url, user, password, batch_size=settings.graph_batch_size)

    return MirrorDrainer(
        db,
        connect,
        batch_size=settings.graph_batch_size,
        max_backoff_seconds=settings.graph_retry_max_seconds,
    )


__all__ = ["Runtime"]

log = structlog.get_logger(__name__)


@dataclass(slots=True)
class Runtime:
    settings: Settings
    db: Database
    embedder: EmbeddingExecutor
    admin: AdminService
    memories: MemoryService
    recall: RecallService
    graph: GraphService
    jobs: JobWorker
    documents: DocumentService
    erasure: ErasureService
    graph_reader: GraphReader
    mirror: MirrorDrainer | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    @classmethod
    async def start(cls, settings: Settings, embedder: Embedder | None = None) -> Runtime:
        """``settings.database_url`` must point at a migrated database."""
        if not settings.database_url:
            raise ValueError("Runtime.start needs settings.database_url")
        if embedder is None:
            embedder = await asyncio.to_thread(
                build_embedder, settings.embedder, settings.embed_threads
            )
        await check_embedding_model(settings.database_url, embedder.model_id, embedder.dim)
        db = Database.connect(
            settings.database_url,
            settings.app_database_url,
            settings.db_pool_size,
            graph_mirror=bool(settings.neo4j_url),
        )
        executor = EmbeddingExecutor(embedder)
        reader = graph_reader(db, settings)
        rerank = RerankStep(
            settings.reranker, settings.rerank_candidates, settings.rerank_timeout_seconds
        )
        pipeline = RecallPipeline(
            db,
            executor,
            [
                lexical_stage(settings),
                VectorStage(),
                GraphStage(reader),
                IdentityStage(),
            ],
            rrf_k=settings.rrf_k,
            stage_timeout_s=settings.stage_timeout_seconds,
            default_weights=settings.weights,
            rerank=rerank,
        )
        graph = GraphService(db)
        jobs = JobWorker(
            db,
            {EXTRACT_JOB: Extraction(db, settings.extractor_list)},
            poll_seconds=settings.job_poll_seconds,
        )
        return cls(
            settings=settings,
            db=db,
            embedder=executor,
            admin=AdminService(db, embedder.model_id, embedder.dim),
            memories=MemoryService(db, executor, settings, graph, on_job_enqueued=jobs.wake),
            recall=RecallService(pipeline, settings),
            graph=graph,
            jobs=jobs,
            documents=DocumentService(db, executor, settings, graph, on_job_enqueued=jobs.wake),
            erasure=ErasureService(db, graph, mirror_enabled=bool(settings.neo4j_url)),
            graph_reader=reader,
            mirror=mirror_drainer(db, settings),
        )

    @property
    def background_tasks(self) -> list[asyncio.Task[None]]:
        return list(self._tasks)

    def start_loading_reranker(self) -> None:
        """Loading a cross-encoder takes seconds (torch): do it without holding up start-up."""
        step = self.recall.pipeline.rerank

        async def load() -> None:
            step.loaded = await asyncio.to_thread(
                load_reranker, self.settings.reranker, self.settings.embed_threads
            )
            log.info("reranker.loaded", active=step.loaded.active, reason=step.loaded.reason)

        self._tasks.append(asyncio.create_task(load(), name="knowmind-reranker-load"))

    def start_workers(self) -> None:
        """Run the job worker and (when configured) the mirror drainer in this process."""
        self._tasks.append(asyncio.create_task(self.jobs.run_forever(), name="knowmind-jobs"))
        if self.mirror is not None:
            self._tasks.append(
                asyncio.create_task(self.mirror.run_forever(), name="knowmind-mirror")
            )

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.mirror is not None:
            await self.mirror.close()
        close_reader = getattr(self.graph_reader, "close", None)
        if close_reader is not None:
            await close_reader()
        await self.embedder.close()
        await self.db.dispose()

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

    async def health_detail(self) -> dict[str, object]:
        """A status per component: postgres, graph mirror, embedder, reranker, job worker."""
        checks = await self.readiness()
        rerank = self.recall.pipeline.rerank
        if not rerank.configured:
            reranker = {"status": "disabled"}
        elif rerank.loaded is None:
            reranker = {"status": "loading"}
        else:
            reranker = {
                "status": "ok" if rerank.loaded.active else "unavailable",
                "reason": rerank.loaded.reason,
            }
        jobs_running = any(t.get_name() == "knowmind-jobs" and not t.done() for t in self._tasks)
        async with self.db.owner_tx() as conn:
            backlog = await job_backlog(conn)
        return {
            "postgres": {"status": checks["database"], "schema": checks["schema"]},
            "graph_mirror": await self.mirror_report(),
            "embedder": {"status": checks["embedder"], "model": self.embedder.model_id},
            "reranker": reranker,
            "job_worker": {
                "status": "ok" if jobs_running else "not running in this process",
                **backlog,
            },
        }

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
                await conn.execute(text("SELECT 1"))
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
        checks["embedder"] = "ok" if self.embedder.dim > 0 else "not loaded"
        return checks
