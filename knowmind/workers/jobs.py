"""The job worker: claims due jobs across tenants and runs them step by step, the tenants taking
turns; retries with backoff; drops a job that was cancelled.

Fairness. Jobs run in two lanes side by side, each one step at a time: the short lane
(extraction: one memory's mentions) and the long lane (``long_kinds``: a large document, a
summary tree), so a memory's extraction never waits behind another tenant's document. A lane
holds at most one job per tenant (up to ``max_held`` tenants) and runs one step of one job per
turn: a job not started yet and the next step of one under way alternate (a new job, usually a
short one, waits for at most one step of the long ones), and the jobs under way take their turns
round-robin, so each tenant gets an equal share of steps whatever it has queued. A job runs in
steps when its handler has a ``step`` method (``SteppedJobHandler``: a document's batch of
chunks to embed, a batch of chunks to scan for mentions); any other handler is one step.
Nothing here runs more than one step of a lane at a time: the embedding model's one thread is
shared by what is submitted when, not by more threads.

Cancellation. A job whose row is gone (erased with its tenant, document or memory) or no longer
running as this worker's stops within a second: ``cancel`` (called by the erasure in this
process) or the watch (every ``watch_seconds``, for erasures made by another process) cancels
its step under way (the embedding work it queued is dropped with it) and it runs no further
step. The watch also renews the leases of the jobs held: a worker that dies leaves them to be
taken over within a lease, and they resume from their recorded progress.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

import structlog

from knowmind.db.engine import Database
from knowmind.errors import KnowmindError, OverloadedError
from knowmind.store import jobs as job_store
from knowmind.store.jobs import JobRow, JobStep

__all__ = ["JobHandler", "JobSignal", "JobWorker", "SteppedJobHandler"]

log = structlog.get_logger(__name__)

JobHandler = Callable[[UUID, dict[str, Any]], Awaitable[dict[str, Any]]]


class SteppedJobHandler(Protocol):
    """A handler that runs its job in steps (besides all at once, as a ``JobHandler``)."""

    async def __call__(self, tenant_id: UUID, payload: dict[str, Any]) -> dict[str, Any]: ...

    async def step(self, job: JobRow, state: dict[str, Any]) -> JobStep:
        """One step of ``job``; ``state`` is the handler's own, kept between the job's steps
        in this process (empty at its first step here: resume from ``job.progress``)."""
        ...


# A claimed job stays with its worker this long past the worker's last renewal (one every
# third of it): a dead worker's jobs are taken over within half a minute.
LEASE_SECONDS = 30
# How often the worker looks whether the jobs it holds were cancelled (erased).
WATCH_SECONDS = 1.0
# Tenants whose jobs one lane holds at once (one job each).
MAX_HELD = 16
# Longest a stopping worker tries to hand its jobs back.
HAND_BACK_SECONDS = 2.0


@dataclass(eq=False, slots=True)
class _Held:
    job: JobRow
    lane: _Lane
    state: dict[str, Any] = field(default_factory=dict)
    steps: int = 0
    task: asyncio.Future[JobStep] | None = None  # the step under way
    cancelled: bool = False

    @property
    def key(self) -> tuple[UUID, UUID]:
        return self.job.tenant_id, self.job.id


@dataclass(eq=False, slots=True)
class _Lane:
    name: str
    kinds: list[str]
    fresh: OrderedDict[UUID, _Held] = field(default_factory=OrderedDict)  # no step run yet
    started: OrderedDict[UUID, _Held] = field(default_factory=OrderedDict)  # in turn order
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    fresh_next: bool = True

    def __len__(self) -> int:
        return len(self.fresh) + len(self.started)

    def tenants(self) -> list[UUID]:
        return [*self.fresh, *self.started]

    def next(self) -> _Held | None:
        """The job whose turn it is: a new one and one under way alternate."""
        take_fresh = bool(self.fresh) and (self.fresh_next or not self.started)
        if take_fresh:
            self.fresh_next = False
            return self.fresh.popitem(last=False)[1]
        if self.started:
            self.fresh_next = True
            return self.started.popitem(last=False)[1]
        return None

    def drop(self, held: _Held) -> None:
        tenant = held.job.tenant_id
        for queue in (self.fresh, self.started):
            if queue.get(tenant) is held:
                del queue[tenant]


class JobSignal:
    """What the services of one process tell the job worker running in it: a job was committed
    (``wake``: no need to wait for the poll) or erased (``cancel``: stop it now). Made before
    both and handed to each, so neither is patched into the other; a process without a worker
    (``KNOWMIND_RUN_WORKERS=off``) signals nobody, and a worker elsewhere notices by polling."""

    def __init__(self) -> None:
        self._workers: list[JobWorker] = []

    def listen(self, worker: JobWorker) -> None:
        self._workers.append(worker)

    def wake(self) -> None:
        for worker in self._workers:
            worker.wake()

    def cancel(self, tenant_id: UUID, job_ids: Collection[UUID] | None = None) -> int:
        """How many of the jobs the workers here held (see ``JobWorker.cancel``)."""
        return sum(worker.cancel(tenant_id, job_ids) for worker in self._workers)


class JobWorker:
    def __init__(
        self,
        db: Database,
        handlers: Mapping[str, JobHandler],
        *,
        signal: JobSignal | None = None,
        poll_seconds: float = 1.0,
        batch: int = 4,
        lease_seconds: int = LEASE_SECONDS,
        max_backoff_seconds: float = 300.0,
        long_kinds: Collection[str] = (),
        watch_seconds: float = WATCH_SECONDS,
        max_held: int = MAX_HELD,
    ) -> None:
        """``signal``: how the services of this process reach it; ``batch``: jobs claimed at
        once (of as many tenants); ``long_kinds``: the kinds run in the long lane;
        ``max_held``: tenants whose jobs a lane holds at once."""
        self.db = db
        self.handlers = dict(handlers)
        self.poll_seconds = poll_seconds
        self.batch = batch
        self.lease_seconds = lease_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self.watch_seconds = min(watch_seconds, lease_seconds / 3)
        self.max_held = max_held
        short = [k for k in self.handlers if k not in long_kinds]
        long = [k for k in self.handlers if k in long_kinds]
        self._lanes = [_Lane(name, kinds) for name, kinds in (("short", short), ("long", long))]
        self._lanes = [lane for lane in self._lanes if lane.kinds]
        self._held: dict[tuple[UUID, UUID], _Held] = {}
        self._renewed_at = time.monotonic()
        if signal is not None:
            signal.listen(self)

    def wake(self) -> None:
        """Called after a job was committed in this process: no need to wait for the poll."""
        for lane in self._lanes:
            lane.wake.set()

    def cancel(self, tenant_id: UUID, job_ids: Collection[UUID] | None = None) -> int:
        """The jobs (all of the tenant's with None) were erased: stop those this worker holds
        now (the step under way is cancelled) and run no further step of them. Returns how
        many it held."""
        found = [
            held
            for (tenant, job_id), held in self._held.items()
            if tenant == tenant_id and (job_ids is None or job_id in job_ids)
        ]
        for held in found:
            self._cancel(held)
        return len(found)

    @property
    def held_jobs(self) -> list[tuple[UUID, UUID]]:
        """(tenant id, job id) of the jobs this worker holds now."""
        return list(self._held)

    async def run_forever(self) -> None:
        tasks = [asyncio.ensure_future(self._lane_forever(lane)) for lane in self._lanes]
        tasks.append(asyncio.ensure_future(self._watch_forever()))
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._hand_back()

    async def run_once(self) -> int:
        """One turn in each lane (claiming first): the number of steps run. Called until it
        returns 0, it runs every due job to its end."""
        watch = asyncio.ensure_future(self._watch_forever())
        try:
            steps = 0
            for lane in self._lanes:
                steps += await self._turn(lane)
            return steps
        finally:
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)

    async def _lane_forever(self, lane: _Lane) -> None:
        while True:
            lane.wake.clear()  # before claiming: a job committed meanwhile sets it again
            try:
                steps = await self._turn(lane)
            except Exception:
                log.exception("jobs.poll_failed", lane=lane.name)
                steps = 0
            if steps == 0:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow the
                # cancellation that shuts the worker down when it races the poll timeout,
                # and the worker then polls forever (seen as a hung Runtime.close()).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll_seconds):
                        await lane.wake.wait()

    async def _turn(self, lane: _Lane) -> int:
        await self._claim(lane)
        held = lane.next()
        if held is None:
            return 0
        await self._step(held)
        return 1

    async def _claim(self, lane: _Lane) -> None:
        """Take due jobs of tenants this lane holds none of, while it has room."""
        room = min(self.batch, self.max_held - len(lane))
        if room <= 0:
            return
        async with self.db.owner_tx() as conn:
            jobs = await job_store.claim_jobs(
                conn,
                lane.kinds,
                room,
                self.lease_seconds,
                skip_tenants=lane.tenants(),
                per_tenant=1,
            )
        for job in jobs:
            held = _Held(job, lane)
            self._held[held.key] = held
            lane.fresh[job.tenant_id] = held

    async def _step(self, held: _Held) -> None:
        task = asyncio.ensure_future(self._call(held))
        held.task = task
        try:
            await asyncio.wait([task])
        finally:
            held.task = None
            if not task.done():  # this worker is being stopped: the step with it
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if held.cancelled or task.cancelled():
            self._cancelled(held)
            return
        error = task.exception()
        if error is not None:
            await self._failed(held, error)
            return
        outcome = task.result()
        held.steps += 1
        job = held.job
        if outcome.done:
            async with self.db.owner_tx() as conn:
                await job_store.finish_job(conn, job.tenant_id, job.id, outcome.result or {})
            self._release(held)
            log.info(
                "jobs.done",
                job_id=str(job.id),
                kind=job.kind,
                tenant_id=str(job.tenant_id),
                steps=held.steps,
            )
            return
        async with self.db.owner_tx() as conn:
            running = await job_store.save_progress(
                conn, job.tenant_id, job.id, outcome.progress or {}
            )
        if not running or held.cancelled:
            self._cancelled(held)
            return
        held.lane.started[job.tenant_id] = held  # its next step after the others' turns

    async def _call(self, held: _Held) -> JobStep:
        handler = self.handlers[held.job.kind]
        step = getattr(handler, "step", None)
        if step is not None:
            outcome: JobStep = await step(held.job, held.state)
            return outcome
        result = await handler(held.job.tenant_id, held.job.payload)
        return JobStep(done=True, result=result)

    async def _failed(self, held: _Held, exc: BaseException) -> None:
        job = held.job
        self._release(held)
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
        if status is None:  # it failed because it was erased meanwhile
            log.info("jobs.cancelled", job_id=str(job.id), kind=job.kind, steps=held.steps)
            return
        log.warning(
            "jobs.failed",
            job_id=str(job.id),
            kind=job.kind,
            status=status,
            attempt=job.attempts,
            steps=held.steps,
            error_type=type(exc).__name__,
        )

    def _cancel(self, held: _Held) -> None:
        held.cancelled = True
        if held.task is not None:
            held.task.cancel()  # _step sees it and lets the job go
        else:
            self._release(held)  # waiting for its turn: it gets none

    def _cancelled(self, held: _Held) -> None:
        self._release(held)
        job = held.job
        log.info("jobs.cancelled", job_id=str(job.id), kind=job.kind, steps=held.steps)

    def _release(self, held: _Held) -> None:
        held.lane.drop(held)
        if self._held.get(held.key) is held:
            del self._held[held.key]

    async def _hand_back(self) -> None:
        """On the way out: the jobs held go back to the queue at once (not when their lease
        runs out), keeping their progress; best effort, bounded."""
        held = list(self._held)
        self._held.clear()
        if not held:
            return
        try:
            async with asyncio.timeout(HAND_BACK_SECONDS):
                async with self.db.owner_tx() as conn:
                    await job_store.hand_back(conn, held)
        except Exception as exc:  # their leases run out instead
            log.warning("jobs.hand_back_failed", error_type=type(exc).__name__)

    async def _watch_forever(self) -> None:
        while True:
            await asyncio.sleep(self.watch_seconds)
            await self._watch()

    async def _watch(self) -> None:
        """Cancel the held jobs that are gone or no longer this worker's; renew the leases of
        the others every third of a lease."""
        held = list(self._held)
        if not held:
            return
        renew = time.monotonic() - self._renewed_at >= self.lease_seconds / 3
        try:
            async with self.db.owner_tx() as conn:
                if renew:
                    await job_store.extend_leases(conn, held, self.lease_seconds)
                running = await job_store.still_running(conn, held)
        except Exception as exc:  # the next look tries again; the lease has slack
            log.warning("jobs.watch_failed", error_type=type(exc).__name__)
            return
        if renew:
            self._renewed_at = time.monotonic()
        for key in held:
            gone = self._held.get(key) if key not in running else None
            if gone is not None:  # erased (or taken over after this worker lost its lease)
                self._cancel(gone)
