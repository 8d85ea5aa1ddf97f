"""The job worker: claims due jobs across tenants, runs their handler, retries with backoff."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from uuid import UUID

import structlog

from knowmind.db.engine import Database
from knowmind.errors import KnowmindError, OverloadedError
from knowmind.store import jobs as job_store

__all__ = ["JobHandler", "JobWorker"]

log = structlog.get_logger(__name__)

JobHandler = Callable[[UUID, dict[str, Any]], Awaitable[dict[str, Any]]]

# A claimed job stays with its worker this long past the worker's last heartbeat (one every
# third of it): a dead worker's jobs are taken over within half a minute.
LEASE_SECONDS = 30


class JobWorker:
    def __init__(
        self,
        db: Database,
        handlers: Mapping[str, JobHandler],
        *,
        poll_seconds: float = 1.0,
        batch: int = 4,
        lease_seconds: int = LEASE_SECONDS,
        max_backoff_seconds: float = 300.0,
    ) -> None:
        self.db = db
        self.handlers = dict(handlers)
        self.poll_seconds = poll_seconds
        self.batch = batch
        self.lease_seconds = lease_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Called after a job was committed in this process: no need to wait for the poll."""
        self._wake.set()

    async def run_forever(self) -> None:
        while True:
            try:
                processed = await self.run_once()
            except Exception:
                log.exception("jobs.poll_failed")
                processed = 0
            if processed == 0:
                self._wake.clear()
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow the
                # cancellation that shuts the worker down when it races the poll timeout,
                # and the worker then polls forever (seen as a hung Runtime.close()).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_seconds):
                        await self._wake.wait()

    async def run_once(self) -> int:
        async with self.db.owner_tx() as conn:
            jobs = await job_store.claim_jobs(
                conn, list(self.handlers), self.batch, self.lease_seconds
            )
        held = {(job.tenant_id, job.id) for job in jobs}
        heartbeat = asyncio.ensure_future(self._heartbeat(held))
        try:
            for job in jobs:
                await self._run(job)
                held.discard((job.tenant_id, job.id))
        finally:
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
        return len(jobs)

    async def _heartbeat(self, held: set[tuple[UUID, UUID]]) -> None:
        """Keep the claimed jobs leased while this worker lives."""
        while held:
            await asyncio.sleep(self.lease_seconds / 3)
            try:
                async with self.db.owner_tx() as conn:
                    await job_store.extend_leases(conn, sorted(held), self.lease_seconds)
            except Exception as exc:  # the next beat tries again; the lease has slack
                log.warning("jobs.heartbeat_failed", error_type=type(exc).__name__)

    async def _run(self, job: job_store.JobRow) -> None:
        try:
            result = await self.handlers[job.kind](job.tenant_id, job.payload)
        except Exception as exc:
            backoff = min(self.max_backoff_seconds, 2.0**job.attempts)
            # a refusal of the input (404, 409, 422) would recur: no retries for it
            final = isinstance(exc, KnowmindError) and not isinstance(exc, OverloadedError)
            async with self.db.owner_tx() as conn:
                status = await job_store.retry_or_fail_job(
                    conn,
                    job.tenant_id,
                    job.id,
                    f"{type(exc).__name__}: {exc}",
                    backoff,
                    final=final,
                )
            log.warning(
                "jobs.failed",
                job_id=str(job.id),
                kind=job.kind,
                status=status,
                attempt=job.attempts,
                error_type=type(exc).__name__,
            )
            return
        async with self.db.owner_tx() as conn:
            await job_store.finish_job(conn, job.tenant_id, job.id, result)
        log.info("jobs.done", job_id=str(job.id), kind=job.kind, tenant_id=str(job.tenant_id))
