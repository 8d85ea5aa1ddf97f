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


class RunOnSpanRecogniserDouble:
    """Test double: an NER model that returns one span longer than an entity name may be (as
    spaCy did on a DBpedia abstract) and one that normalises to nothing, besides a real one."""

    name = "double"

    def find(self, text):
        from knowmind.ingest.ner import Span

        return [
            Span("Quelle " * 60, "Organization", 0.6, 0, 5),
            Span("--", "Organization", 0.6, 0, 2),
            Span("Frankfurt AG", "Organization", 0.9, 4, 16),
        ]


async def test_unnameable_spans_are_skipped_not_retried(db, tenant, monkeypatch):
    import knowmind.ingest.extract as extract

    monkeypatch.setattr(extract, "build_recognisers", lambda *_: [RunOnSpanRecogniserDouble()])
    tenant_id = uuid.UUID(tenant.id)
    async with db.tenant_tx(tenant_id, write=True) as conn:
        memory_id = await conn.scalar(
            text(
                "INSERT INTO memories (tenant_id, content, content_sha256) "
                "VALUES (:t, 'Die Frankfurt AG', sha256('x'::bytea)) RETURNING id"
            ),
            {"t": tenant_id},
        )
        await conn.execute(
            text(
                "INSERT INTO chunks (tenant_id, memory_id, ordinal, content, language, embedding) "
                "SELECT :t, :m, 0, 'Die Frankfurt AG', 'german', "
                "CAST(array_fill(0.1, ARRAY[value::int]) AS vector) FROM knowmind_meta "
                "WHERE key = 'embedding_dim'"
            ),
            {"t": tenant_id, "m": memory_id},
        )
    counts = await extract.Extraction(db, ["ner"])(tenant_id, {"memory_id": str(memory_id)})
    assert counts["spans_skipped"] == 2 and counts["ner"] == 1
    async with db.tenant_tx(tenant_id) as conn:
        names = (await conn.execute(text("SELECT name FROM entities"))).scalars().all()
    assert names == ["Frankfurt AG"]


async def test_a_live_workers_job_stays_its_own_and_a_dead_ones_is_taken_over(db, tenant):
    """Leases are short and renewed by a heartbeat: a slow job is not taken from a live worker,
    and a dead worker's job is taken over within a lease, not a fixed five minutes."""
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(tenant_id, payload):
        started.set()
        await release.wait()
        return {}

    async with db.tenant_tx(uuid.UUID(tenant.id)) as conn:
        await conn.execute(
            text("INSERT INTO jobs (tenant_id, kind) VALUES (:t, 'slow')"), {"t": tenant.id}
        )
    first = JobWorker(db, {"slow": slow}, lease_seconds=1)
    other = JobWorker(db, {"slow": slow}, lease_seconds=1)
    running = asyncio.ensure_future(first.run_once())
    await asyncio.wait_for(started.wait(), 10)
    await asyncio.sleep(1.5)  # past the first lease: the heartbeat renewed it
    assert await other.run_once() == 0
    running.cancel()  # the first worker dies in the middle of the job
    await asyncio.gather(running, return_exceptions=True)
    await asyncio.sleep(1.2)
    release.set()
    assert await other.run_once() == 1


async def test_tenants_take_turns_at_the_job_worker(db):
    """Twenty jobs of one tenant queued first do not hold back another tenant's one: a claim
    takes each tenant's oldest due job before anyone's second."""
    from knowmind.store import jobs as job_store
    from knowmind.store.tenants import create_tenant

    kind = f"fairness-{uuid.uuid4().hex[:8]}"  # a kind no other worker claims
    async with db.owner_tx() as conn:
        busy = (await create_tenant(conn, f"busy-{uuid.uuid4().hex[:8]}", "german", "m", 384)).id
        quiet = (await create_tenant(conn, f"quiet-{uuid.uuid4().hex[:8]}", "german", "m", 384)).id
    for n in range(20):  # one transaction each: run_after (now()) orders them
        async with db.owner_tx() as conn:
            await job_store.enqueue_job(conn, busy, kind, {"n": n})
    async with db.owner_tx() as conn:
        late = await job_store.enqueue_job(conn, quiet, kind, {"n": 0})
    async with db.owner_tx() as conn:
        claimed = await job_store.claim_jobs(conn, [kind], 4, 30)
    assert len(claimed) == 4
    assert late in {job.id for job in claimed}
    assert sorted(job.payload["n"] for job in claimed if job.tenant_id == busy) == [0, 1, 2]


async def test_a_refused_input_fails_the_job_at_once(db):
    """An error that would recur (the input refused: 404/409/422) is not retried."""
    from knowmind.errors import InvalidInputError
    from knowmind.store import jobs as job_store
    from knowmind.store.tenants import create_tenant

    kind = f"refused-{uuid.uuid4().hex[:8]}"

    async def refuses(tenant_id, payload):
        raise InvalidInputError("relations[0].predicate", "unknown predicate 'X'")

    async with db.owner_tx() as conn:
        tenant = (await create_tenant(conn, f"r-{uuid.uuid4().hex[:8]}", "german", "m", 384)).id
        job_id = await job_store.enqueue_job(conn, tenant, kind, {"content": "Text."})
    worker = JobWorker(db, {kind: refuses})
    assert await worker.run_once() == 1
    async with db.owner_tx() as conn:
        status, attempts, error, payload = (
            await conn.execute(
                text("SELECT status, attempts, last_error, payload FROM jobs WHERE id = :j"),
                {"j": job_id},
            )
        ).one()
    assert (status, attempts) == ("failed", 1)
    assert "unknown predicate" in error and payload == {}  # the text is not kept
