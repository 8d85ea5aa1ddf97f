"""The ingest subsystem: memories, documents and the status of their background jobs. Each
job they commit is signalled to the worker of this process (``JobSignal``)."""

from __future__ import annotations

from dataclasses import dataclass

from knowmind.db.engine import Database
from knowmind.runtime.graph import GraphParts
from knowmind.runtime.models import ModelParts
from knowmind.services.documents import DocumentService
from knowmind.services.jobs import JobService
from knowmind.services.memories import MemoryService
from knowmind.settings import IngestSettings
from knowmind.workers.jobs import JobSignal

__all__ = ["IngestParts", "build_ingest"]


@dataclass(frozen=True, slots=True)
class IngestParts:
    memories: MemoryService
    documents: DocumentService
    jobs: JobService  # the background jobs of both (extraction, large documents)


def build_ingest(
    settings: IngestSettings,
    db: Database,
    models: ModelParts,
    graph: GraphParts,
    signal: JobSignal,
) -> IngestParts:
    embedder = models.embedder
    return IngestParts(
        MemoryService(db, embedder, settings, graph.service, on_job_enqueued=signal.wake),
        DocumentService(
            db,
            embedder,
            settings,
            graph.service,
            on_job_enqueued=signal.wake,
            tree_unavailable=models.llm_problem if models.llm is None else None,
        ),
        JobService(db, settings.wait_timeout_seconds),
    )
