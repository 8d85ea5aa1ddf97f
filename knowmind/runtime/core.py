"""A running process's subsystems, each built by its own builder and held as its parts: the
server's lifespan (``knowmind.app``), ``knowmind worker`` and ``knowmind import`` start one."""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass

import structlog

from knowmind.db.embedded import EmbeddedPostgres
from knowmind.models.base import Embedder
from knowmind.runtime.admin import AdminParts, build_admin
from knowmind.runtime.answers import AnswerParts, build_answers
from knowmind.runtime.database import DatabaseParts, build_database
from knowmind.runtime.graph import GraphParts, build_graph
from knowmind.runtime.ingest import IngestParts, build_ingest
from knowmind.runtime.models import ModelParts, build_models
from knowmind.runtime.names import check_registered_names
from knowmind.runtime.recall import RecallParts, build_recall
from knowmind.runtime.workers import WorkerParts, build_workers
from knowmind.settings import Settings
from knowmind.workers.jobs import JobSignal

__all__ = ["Runtime", "freeze_live_objects"]

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Runtime:
    """The running server's parts, one per subsystem, as the app factory wires them."""

    database: DatabaseParts
    models: ModelParts
    graph: GraphParts
    recall: RecallParts
    answers: AnswerParts
    ingest: IngestParts
    workers: WorkerParts
    admin: AdminParts

    @classmethod
    async def start(
        cls,
        settings: Settings,
        embedder: Embedder | None = None,
        embedded: EmbeddedPostgres | None = None,
        query_embedder: Embedder | None = None,
    ) -> Runtime:
        """``settings.database.database_url`` must point at a migrated database; ``embedder``:
        a model loaded already (else it is loaded here); ``embedded``: the embedded server
        the database runs on (restarted by the supervisor if it dies)."""
        if not settings.database.database_url:
            raise ValueError("Runtime.start needs settings.database.database_url")
        check_registered_names(settings)
        models = await build_models(settings, embedder, query_embedder)
        database = build_database(settings, embedded)
        db = database.db
        graph = build_graph(settings.graph, db)
        recall = build_recall(settings.recall, db, models, graph)
        answers = build_answers(db, models, recall)
        signal = JobSignal()  # the services' news for the job worker below
        ingest = build_ingest(settings.ingest, db, models, graph, signal)
        workers = build_workers(settings.ingest, db, models, graph, answers, ingest, signal)
        admin = build_admin(settings, database, models, graph, recall, workers)
        return cls(database, models, graph, recall, answers, ingest, workers, admin)

    @property
    def background_tasks(self) -> list[asyncio.Task[None]]:
        return self.workers.background.tasks

    def start_loading_reranker(self, *, freeze_heap: bool = False) -> None:
        """Load the reranker and warm both models without holding up start-up; ``/ready``
        says ready only once the warm-up is done, so the first recall is not the slow one.

        ``freeze_heap``: for the process that owns this runtime (the server): once warm, keep
        what start-up built out of later garbage collections (``freeze_live_objects``;
        ``close`` hands the objects back to the collector)."""
        background, models = self.workers.background, self.models
        loading = background.start(models.rerank.load(models.threads), "knowmind-reranker-load")
        background.freezes_heap = freeze_heap
        then = (lambda: freeze_live_objects("start-up")) if freeze_heap else None
        background.add(models.warmup.start(loading, then))

    async def wait_until_warm(self) -> None:
        """Until the warm-up ``start_loading_reranker`` started has ended."""
        await self.models.warmup.wait()

    def start_supervision(self) -> None:
        """Watch the database (and restart the embedded one this process owns)."""
        supervisor = self.database.supervisor
        self.workers.background.start(supervisor.run_forever(), "knowmind-supervisor")

    def start_workers(self) -> None:
        """Run the job worker and (when configured) the mirror drainer in this process."""
        self.workers.start()

    async def close(self) -> None:
        await self.workers.background.stop()
        await self.graph.close()
        await self.models.close()
        await self.database.db.dispose()


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
