"""The workers subsystem: the job worker with its handlers (extraction, large documents, summary
trees), the graph mirror's drainer, and the background tasks a process runs beside its
requests."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import structlog

from knowmind.db.engine import Database
from knowmind.ingest.extract import EXTRACT_JOB, Extraction
from knowmind.ingest.sentences import SENTENCE_JOB, SentenceBackfill
from knowmind.runtime.answers import AnswerParts
from knowmind.runtime.graph import GraphParts
from knowmind.runtime.ingest import IngestParts
from knowmind.runtime.models import ModelParts
from knowmind.services.document_jobs import DocumentIngestJob
from knowmind.services.documents import INGEST_DOCUMENT_JOB, SUMMARY_TREE_JOB
from knowmind.services.llm_graph import LLMGraphExtraction
from knowmind.services.summary_tree import SummaryTreeJob
from knowmind.settings import IngestSettings
from knowmind.workers.jobs import JobSignal, JobWorker
from knowmind.workers.mirror import MirrorDrainer

__all__ = ["CLOSE_TIMEOUT_S", "JOBS_TASK", "Background", "WorkerParts", "build_workers"]

log = structlog.get_logger(__name__)
CLOSE_TIMEOUT_S = 10.0  # longest wait for background tasks to stop on shutdown
JOBS_TASK = "knowmind-jobs"


class Background:
    """The tasks a process runs beside its requests (supervision, model loading, the workers),
    stopped together; ``freezes_heap``: start-up's objects were frozen (``gc.freeze``) and go
    back to the collector when they stop."""

    def __init__(self) -> None:
        self._tasks: list[asyncio.Task[None]] = []
        self.freezes_heap = False

    def start(self, work: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        return self.add(asyncio.create_task(work, name=name))

    def add(self, task: asyncio.Task[None]) -> asyncio.Task[None]:
        self._tasks.append(task)
        return task

    @property
    def tasks(self) -> list[asyncio.Task[None]]:
        return list(self._tasks)

    def running(self, name: str) -> bool:
        return any(t.get_name() == name and not t.done() for t in self._tasks)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            # bounded: a task that ignores its cancellation must not hang the shutdown
            _, stuck = await asyncio.wait(self._tasks, timeout=CLOSE_TIMEOUT_S)
            for task in stuck:
                log.warning("runtime.task_did_not_stop", task=task.get_name())
        if self.freezes_heap:  # a process that starts another runtime must not keep cycles
            gc.unfreeze()


@dataclass(frozen=True, slots=True)
class WorkerParts:
    jobs: JobWorker
    mirror: MirrorDrainer | None  # the graph's, run here with the job worker
    signal: JobSignal
    background: Background

    def start(self) -> None:
        """Run the job worker and (when configured) the mirror drainer in this process."""
        self.background.start(self.jobs.run_forever(), JOBS_TASK)
        if self.mirror is not None:
            self.background.start(self.mirror.run_forever(), "knowmind-mirror")


def build_workers(
    settings: IngestSettings,
    db: Database,
    models: ModelParts,
    graph: GraphParts,
    answers: AnswerParts,
    ingest: IngestParts,
    signal: JobSignal,
) -> WorkerParts:
    tenant_model = answers.service.tenant_model
    sentences = models.embedder if settings.sentence_vectors == "on" else None
    extraction = Extraction(
        db,
        settings.extractor_list,
        LLMGraphExtraction(db, graph.service, tenant_model, settings.extraction_prompt),
        sentences=sentences,
    )
    worker = JobWorker(
        db,
        {
            EXTRACT_JOB: extraction,
            SENTENCE_JOB: SentenceBackfill(db, sentences),
            INGEST_DOCUMENT_JOB: DocumentIngestJob(ingest.documents),
            SUMMARY_TREE_JOB: SummaryTreeJob(db, models.embedder, tenant_model),
        },
        signal=signal,
        poll_seconds=settings.job_poll_seconds,
        long_kinds=(INGEST_DOCUMENT_JOB, SUMMARY_TREE_JOB, SENTENCE_JOB),  # a lane of their own
    )
    return WorkerParts(worker, graph.mirror, signal, Background())
