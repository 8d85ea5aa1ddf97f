"""Extraction jobs: polled by id, retried with backoff, and they survive a server restart."""

from __future__ import annotations

import asyncio
import random
import uuid

from litestar.testing import AsyncTestClient
from sqlalchemy import text

from knowmind.app import create_app
from knowmind.workers.jobs import JobWorker


async def test_job_status_can_be_polled(client, tenant):
    stored = await client.post(
        "/v1/memories",
        json={"content": "Die Frankfurt AG eröffnet ein Büro."},
        headers=tenant.write,
    )
    job_id = stored.json()["job_id"]
    assert stored.json()["job"] is None  # no ?wait: the response does not wait for extraction
    job = await client.get(f"/v1/jobs/{job_id}", headers=tenant.read)
    assert job.status_code == 200
    assert job.json()["kind"] == "extract_mentions"
    assert job.json()["status"] in ("pending", "running", "done")
    assert (await client.get(f"/v1/jobs/{uuid.uuid4()}", headers=tenant.read)).status_code == 404


async def test_jobs_survive_a_server_restart(settings, embedder, db):
    """A server without workers accepts the memory and stops; a worker started afterwards (as
    after a restart, or `knowmind worker`) finds the committed job and runs it."""
    quiet = settings.with_overrides(run_workers="off")
    async with AsyncTestClient(app=create_app(quiet, embedder=embedder)) as first_server:
        from tests.conftest import make_tenant

        tenant = await make_tenant(first_server)
        stored = await first_server.post(
            "/v1/memories",
            json={"content": "Frau Petra Lang übernimmt den Einkauf."},
            headers=tenant.write,
        )
        job_id = stored.json()["job_id"]
        pending = await first_server.get(f"/v1/jobs/{job_id}", headers=tenant.read)
        assert pending.json()["status"] == "pending"

    from knowmind.ingest.extract import EXTRACT_JOB, Extraction

    worker = JobWorker(db, {EXTRACT_JOB: Extraction(db, ["gazetteer", "ner"])})
    while await worker.run_once():
        pass
    async with db.owner_tx() as conn:
        status, result = (
            await conn.execute(text("SELECT status, result FROM jobs WHERE id = :j"), {"j": job_id})
        ).one()
    assert status == "done"
    assert result["ner"] >= 1  # "Frau Petra Lang" → Person


async def test_failing_jobs_back_off_then_fail(db, tenant):
    attempts = []

    async def flaky(tenant_id, payload):
        attempts.append(payload)
        raise RuntimeError("extractor exploded")

    async with db.tenant_tx(uuid.UUID(tenant.id)) as conn:
        job_id = await conn.scalar(
            text(
                "INSERT INTO jobs (tenant_id, kind, max_attempts) VALUES (:t, 'flaky', 2) "
                "RETURNING id"
            ),
            {"t": tenant.id},
        )
    worker = JobWorker(db, {"flaky": flaky}, max_backoff_seconds=60)
    await worker.run_once()

    async def state():
        async with db.owner_tx() as conn:
            return (
                await conn.execute(
                    text(
                        "SELECT status, attempts, last_error, run_after > now() AS later "
                        "FROM jobs WHERE id = :j"
                    ),
                    {"j": job_id},
                )
            ).one()

    first = await state()
    assert (first.status, first.attempts, first.later) == ("pending", 1, True)
    assert "extractor exploded" in first.last_error
    await worker.run_once()  # not due yet: backoff holds it
    assert len(attempts) == 1
    async with db.owner_tx() as conn:
        await conn.execute(text("UPDATE jobs SET run_after = now() WHERE id = :j"), {"j": job_id})
    await worker.run_once()
    final = await state()
    assert (final.status, final.attempts) == ("failed", 2)


async def test_worker_stops_when_cancelled_at_any_moment(db):
    """Shutdown cancels the worker; the cancellation must never be lost, whenever it lands
    (Python 3.11's wait_for could swallow one racing the poll timeout, and the worker then
    polled forever)."""
    rng = random.Random(7)
    for _ in range(60):
        worker = JobWorker(db, {}, poll_seconds=0.001)
        task = asyncio.create_task(worker.run_forever())
        await asyncio.sleep(rng.uniform(0, 0.02))
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=2)
        assert done, "the job worker ignored its cancellation"
