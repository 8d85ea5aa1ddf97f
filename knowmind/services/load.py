"""What ``/metrics`` reports beside the request counters, read when it is scraped: the embedding
queue, the recalls running and waiting, the job backlog and the graph mirror's lag. Every
tenant's together: only the server admin reads them."""

from __future__ import annotations

from dataclasses import dataclass

from knowmind.db.engine import Database
from knowmind.models.executor import EmbeddingExecutor
from knowmind.services.admission import FairGate
from knowmind.store.jobs import job_backlog
from knowmind.store.outbox import outbox_lag

__all__ = ["Backlog", "Load", "LoadService"]


@dataclass(frozen=True, slots=True)
class Backlog:
    """What the database holds: jobs waiting and failed, mirror changes not yet sent."""

    pending_jobs: int
    failed_jobs: int
    mirror_pending: int
    mirror_oldest_s: float


@dataclass(frozen=True, slots=True)
class Load:
    queued_passages: int  # waiting for the embedder, all tenants
    queued_tenants: int  # tenants with passages waiting
    recalls: tuple[int, int] | None  # (running, waiting); None: no gate
    backlog: Backlog | None  # None: the database did not answer


class LoadService:
    def __init__(self, db: Database, embedder: EmbeddingExecutor, gate: FairGate | None) -> None:
        self.db, self.embedder, self.gate = db, embedder, gate

    async def load(self) -> Load:
        waiting = self.embedder.waiting_passages()
        gate = self.gate
        recalls = None if gate is None else (gate.running, gate.waiting)
        return Load(sum(waiting.values()), len(waiting), recalls, await self._backlog())

    async def _backlog(self) -> Backlog | None:
        try:
            async with self.db.owner_tx() as conn:
                jobs = await job_backlog(conn)
                pending, oldest = await outbox_lag(conn)
        except Exception:  # the database is down: /health says the rest
            return None
        return Backlog(jobs["pending_jobs"], jobs["failed_jobs"], pending, oldest)
