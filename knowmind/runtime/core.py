"""Everything a running server holds: pools, the embedder and the services built on them."""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass, field

import structlog

from knowmind.db.embedded import EmbeddedPostgres
from knowmind.db.engine import Database
from knowmind.db.migrate import check_embedding_model
from knowmind.graph.base import GraphReader
from knowmind.graph.registry import BoltAccess, build_graph_reader
from knowmind.ingest.extract import EXTRACT_JOB, Extraction
from knowmind.models.base import Embedder
from knowmind.models.executor import EmbeddingExecutor
from knowmind.models.factory import build_embedder, build_query_embedder
from knowmind.models.language import language_detector
from knowmind.models.llm import LLM
from knowmind.models.llm_factory import build_llm
from knowmind.recall.bm25 import LexicalOptions
from knowmind.recall.pipeline import RecallPipeline
from knowmind.recall.registry import StageParts, build_stages
from knowmind.recall.rerank import RerankStep
from knowmind.runtime.names import check_registered_names
from knowmind.services.access import AccessControl, TrustedProxies
from knowmind.services.admin import AdminService
from knowmind.services.admission import FairGate
from knowmind.services.answer import AnswerService
from knowmind.services.audit import AuditService
from knowmind.services.document_jobs import DocumentIngestJob
from knowmind.services.documents import (
    INGEST_DOCUMENT_JOB,
    SUMMARY_TREE_JOB,
    DocumentService,
)
from knowmind.services.erasure import ErasureService
from knowmind.services.graph import GraphService
from knowmind.services.health import HealthService, HostFacts, WarmUp
from knowmind.services.jobs import JobService
from knowmind.services.limits import RequestLimits
from knowmind.services.llm_graph import LLMGraphExtraction
from knowmind.services.memories import MemoryService
from knowmind.services.recall import RecallService
from knowmind.services.summary_tree import SummaryTreeJob
from knowmind.services.supervision import DatabaseSupervisor
from knowmind.services.tenant_archive import TenantArchiveService
from knowmind.services.tenant_settings import TenantSettingsService
from knowmind.settings import (
    GraphSettings,
    RecallSettings,
    Settings,
    SettingsError,
    available_cores,
)
from knowmind.workers.jobs import JobWorker
from knowmind.workers.mirror import MirrorDrainer

log = structlog.get_logger(__name__)
CLOSE_TIMEOUT_S = 10.0  # longest wait for background tasks to stop on shutdown


def graph_reader(db: Database, settings: GraphSettings) -> GraphReader:
    bolt = None
    if settings.neo4j_url:
        bolt = BoltAccess(settings.neo4j_url, settings.neo4j_user, settings.neo4j_password)
    return build_graph_reader(settings.graph_backend, db, bolt)


def lexical_options(settings: RecallSettings) -> LexicalOptions:
    """The bm25 stage's options from the recall settings."""
    return LexicalOptions(
        k1=settings.bm25_k1,
        b=settings.bm25_b,
        postings_budget=settings.bm25_postings_budget,
        typos=settings.bm25_typos == "on",
        compounds=settings.bm25_compounds == "on",
        query_language=settings.bm25_query_language == "on",
    )


def mirror_drainer(db: Database, settings: GraphSettings) -> MirrorDrainer | None:
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


__all__ = ["Runtime", "freeze_live_objects"]


@dataclass(slots=True)
class Runtime:
    settings: Settings
    db: Database
    embedder: EmbeddingExecutor
    admin: AdminService
    memories: MemoryService
    recall: RecallService
    answers: AnswerService
    tenant_settings: TenantSettingsService
    graph: GraphService
    jobs: JobService
    job_worker: JobWorker
    documents: DocumentService
    erasure: ErasureService
    audit: AuditService
    tenant_archive: TenantArchiveService
    access: AccessControl  # every door's authentication, lockout, rate and scope
    supervisor: DatabaseSupervisor
    graph_reader: GraphReader
    health: HealthService
    mirror: MirrorDrainer | None = None
    llm: LLM | None = None  # None: see health's capabilities for why
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _warmup: WarmUp | None = None
    _freezes_heap: bool = False

    @classmethod
    async def start(
        cls,
        settings: Settings,
        embedder: Embedder | None = None,
        embedded: EmbeddedPostgres | None = None,
        query_embedder: Embedder | None = None,
    ) -> Runtime:
        """``settings.database.database_url`` must point at a migrated database."""
        if not settings.database.database_url:
            raise ValueError("Runtime.start needs settings.database.database_url")
        check_registered_names(settings)
        models = settings.models
        if embedder is None:  # built here: the query instance too, when configured
            embedder = await asyncio.to_thread(
                build_embedder, models.embedder, models.embedder_threads
            )
            query_embedder = await asyncio.to_thread(
                build_query_embedder,
                models.embedder,
                models.embedder_threads,
                models.separate_query_model,
            )
        await check_embedding_model(settings.database.database_url, embedder.model_id, embedder.dim)
        llm, no_llm = build_llm(models.llm_setup)
        if llm is None and "llm" in settings.ingest.extractor_list:
            raise SettingsError(f"KNOWMIND_EXTRACTORS=llm needs a language model: {no_llm}")
        db = Database.connect(
            settings.database.database_url,
            settings.database.app_database_url,
            settings.database.db_pool_size,
            graph_mirror=bool(settings.graph.neo4j_url),
            tenant_scope=settings.database.tenant_scope,
        )
        executor = EmbeddingExecutor(
            embedder,
            max_owner_texts=settings.models.embed_queue_per_tenant,
            max_queued_texts=settings.models.embed_queue_total,
            query_embedder=query_embedder,
        )
        reader = graph_reader(db, settings.graph)
        lexical = lexical_options(settings.recall)
        rerank = RerankStep(
            settings.models.reranker,
            settings.models.rerank_candidates,
            settings.models.rerank_timeout_seconds,
            thread=executor.model_thread,
        )
        pipeline = RecallPipeline(
            db,
            executor,
            build_stages(
                StageParts(
                    graph_reader=reader,
                    vector_exact_max_rows=settings.recall.vector_exact_max_rows,
                    vector_ef_search=settings.recall.vector_ef_search,
                    vector_tenant_ef_search=settings.recall.vector_tenant_ef_search,
                    graph_hit_wait_s=settings.recall.graph_hit_wait_seconds,
                    lexical=lexical,
                    language_detector=language_detector() if lexical.query_language else None,
                )
            ),
            rrf_k=settings.recall.rrf_k,
            stage_timeout_s=settings.recall.stage_timeout_seconds,
            default_weights=settings.recall.weights,
            rerank=rerank,
            fusion=settings.recall.recall_fusion,
            ranker=settings.recall.ranker,
        )
        graph = GraphService(db)
        documents = DocumentService(db, executor, settings.ingest, graph)
        documents.tree_unavailable = None if llm else no_llm
        slots = settings.recall.recall_concurrency or 2 * available_cores()
        recall = RecallService(pipeline, settings.recall.recall_candidates, FairGate(slots))
        answers = AnswerService(db, recall, executor, llm, no_llm, models.llm_setup)
        worker = JobWorker(
            db,
            {
                EXTRACT_JOB: Extraction(
                    db,
                    settings.ingest.extractor_list,
                    LLMGraphExtraction(
                        db, graph, answers.tenant_model, settings.ingest.extraction_prompt
                    ),
                ),
                INGEST_DOCUMENT_JOB: DocumentIngestJob(documents),
                SUMMARY_TREE_JOB: SummaryTreeJob(db, executor, answers.tenant_model),
            },
            poll_seconds=settings.ingest.job_poll_seconds,
            long_kinds=(INGEST_DOCUMENT_JOB, SUMMARY_TREE_JOB),  # a lane of their own
        )
        documents.on_job_enqueued = worker.wake
        tasks: list[asyncio.Task[None]] = []
        warmup = WarmUp(executor, rerank)
        mirror = mirror_drainer(db, settings.graph)
        health = HealthService(
            db,
            executor,
            pipeline,
            reader,
            mirror,
            HostFacts(
                settings.models.embedder,
                tuple(settings.ingest.extractor_list),
                llm_provider=llm.provider if llm else "none",
                llm_model=llm.model if llm else None,
                llm_configured=models.llm_provider,
                llm_reason=no_llm,
            ),
            jobs_running=lambda: any(
                t.get_name() == "knowmind-jobs" and not t.done() for t in tasks
            ),
            warmup=warmup,
        )
        return cls(
            settings=settings,
            db=db,
            embedder=executor,
            admin=AdminService(db, embedder.model_id, embedder.dim),
            memories=MemoryService(
                db, executor, settings.ingest, graph, on_job_enqueued=worker.wake
            ),
            recall=recall,
            answers=answers,
            tenant_settings=answers.tenant_settings,
            graph=graph,
            jobs=JobService(db, settings.ingest.wait_timeout_seconds),
            job_worker=worker,
            documents=documents,
            erasure=ErasureService(
                db,
                graph,
                mirror_enabled=bool(settings.graph.neo4j_url),
                on_jobs_cancelled=worker.cancel,  # the jobs it erases stop at once
            ),
            audit=AuditService(db),
            tenant_archive=TenantArchiveService(db, embedder.model_id, embedder.dim),
            supervisor=DatabaseSupervisor(db, embedded),
            access=AccessControl(
                db,
                settings.server.admin_token,
                RequestLimits.of(
                    settings.server.rate_limit_per_second,
                    settings.server.rate_limit_burst,
                    settings.server.auth_failures_before_lockout,
                ),
                TrustedProxies(settings.server.trusted_proxies),
            ),
            graph_reader=reader,
            health=health,
            mirror=mirror,
            llm=llm,
            _tasks=tasks,
            _warmup=warmup,
        )

    @property
    def background_tasks(self) -> list[asyncio.Task[None]]:
        return list(self._tasks)

    def start_loading_reranker(self, *, freeze_heap: bool = False) -> None:
        """Load the reranker and warm both models without holding up start-up; ``/ready``
        says ready only once the warm-up is done, so the first recall is not the slow one.

        ``freeze_heap``: for the process that owns this runtime (the server): once warm, keep
        what start-up built out of later garbage collections (``freeze_live_objects``;
        ``close`` hands the objects back to the collector)."""
        load = self.recall.pipeline.rerank.load(self.settings.models.embedder_threads)
        loading = asyncio.create_task(load, name="knowmind-reranker-load")
        self._tasks.append(loading)
        self._freezes_heap = freeze_heap
        if self._warmup is not None:
            then = (lambda: freeze_live_objects("start-up")) if freeze_heap else None
            self._tasks.append(self._warmup.start(loading, then))

    async def wait_until_warm(self) -> None:
        """Until the warm-up ``start_loading_reranker`` started has ended."""
        if self._warmup is not None:
            await self._warmup.wait()

    def start_supervision(self) -> None:
        """Watch the database (and restart the embedded one this process owns)."""
        task = asyncio.create_task(self.supervisor.run_forever(), name="knowmind-supervisor")
        self._tasks.append(task)

    def start_workers(self) -> None:
        """Run the job worker and (when configured) the mirror drainer in this process."""
        self._tasks.append(asyncio.create_task(self.job_worker.run_forever(), name="knowmind-jobs"))
        if self.mirror is not None:
            self._tasks.append(
                asyncio.create_task(self.mirror.run_forever(), name="knowmind-mirror")
            )

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            # bounded: a task that ignores its cancellation must not hang the shutdown
            _, stuck = await asyncio.wait(self._tasks, timeout=CLOSE_TIMEOUT_S)
            for task in stuck:
                log.warning("runtime.task_did_not_stop", task=task.get_name())
        if self.mirror is not None:
            await self.mirror.close()
        if self.llm is not None:
            await self.llm.close()
        close_reader = getattr(self.graph_reader, "close", None)
        if close_reader is not None:
            await close_reader()
        await self.embedder.close()
        await self.db.dispose()
        if self._freezes_heap:  # a process that starts another runtime must not keep cycles
            gc.unfreeze()


def freeze_live_objects(holder: str) -> None:
    """Move every object alive now into the permanent generation (``gc.freeze``), ``holder``
    naming what holds them (for the log). What start-up built (modules, models, settings,
    pools) lives as long as the process, and each full collection would otherwise traverse all
    of it again inside whichever request set the collection off: ≈ 60 ms for a warm server's
    ≈ 130k objects on this 2-core host, a pause every request in flight waits out. Later
    collections traverse only newer objects; refcounting still frees what is dropped."""
    gc.collect()
    gc.freeze()
    log.info("gc.objects_frozen", holder=holder, objects=gc.get_freeze_count())
