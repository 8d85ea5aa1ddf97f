"""Fair, bounded background work (issue 42): per-tenant quotas on queued jobs and payload
bytes (429 with Retry-After, nothing written), long jobs in steps with the tenants taking turns
and a lane of their own (another tenant's extraction does not wait behind a document), a
``?wait=true`` bounded by its timeout, and erasure cancelling queued and running jobs. Real
PostgreSQL, the real embedder and a real job worker throughout."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from knowmind.app import create_app
from knowmind.models.executor import EmbeddingExecutor
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.document_jobs import DocumentIngestJob
from knowmind.services.documents import DocumentDraft, DocumentService, document_payload
from knowmind.services.erasure import ErasureService
from knowmind.services.graph import GraphService
from knowmind.services.memories import MemoryDraft
from knowmind.store import jobs as job_store
from knowmind.store.jobs import JobRow, JobStep
from knowmind.store.tenants import create_tenant
from knowmind.workers.jobs import JobWorker
from tests.conftest import ADMIN_HEADERS, RecordingModel, count_rows, make_tenant
from tests.test_mcp import call

PARAGRAPH = (
    "Der Standort {i} meldet Wartungsfenster am Dienstag; die Ansprechpartnerin ist Frau "
    "Berger-{i}, erreichbar über das Ticketsystem. Ersatzteile liegen im Lager Kassel, Regal {i}, "
    "und werden nach Bedarf versandt. Änderungen am Wartungsplan kündigt der Betrieb eine Woche "
    "vorher an, damit die Teams ihre Arbeit planen können; offene Punkte gehen an das Team {i}. "
)


def handbook(sections: int, label: str = "Wartungshandbuch") -> str:
    """A Markdown document of about one chunk per section."""
    body = "\n\n".join(f"## Abschnitt {i}\n\n" + PARAGRAPH.format(i=i) * 3 for i in range(sections))
    return f"# {label}\n\n{body}"


async def _job(db, tenant: UUID, job_id: UUID) -> JobRow | None:
    async with db.owner_tx() as conn:
        return await job_store.get_job(conn, tenant, job_id)


async def _until(predicate, timeout_s: float, what: str, every_s: float = 0.1) -> float:
    """Seconds until ``await predicate()`` is true."""
    started = time.monotonic()
    while not await predicate():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        await asyncio.sleep(every_s)
    return time.monotonic() - started


async def _new_tenant(runtime: Runtime, name: str) -> Principal:
    row = await runtime.admin.admin.create_tenant(f"{name}-{uuid.uuid4().hex[:8]}", "german")
    return Principal(UUID(str(row.id)), frozenset({"read", "write"}), language="german")


async def _rows(db, tenant: UUID, tables: tuple[str, ...]) -> dict[str, int]:
    return {table: await count_rows(db, table, str(tenant)) for table in tables}


# --- quotas ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
async def quota_client(settings, embedder) -> AsyncIterator[AsyncTestClient]:
    """A server with small quotas and no job worker: what is queued stays queued."""
    small = settings.with_overrides(
        run_workers="off",
        job_queue_jobs_per_tenant=3,
        job_queue_bytes_per_tenant=150_000,
        max_body_bytes=1024 * 1024,
    )
    async with AsyncTestClient(app=create_app(small, embedder=embedder)) as client:
        yield client


async def test_writes_beyond_the_job_quota_are_429_and_write_nothing(quota_client, db):
    client = quota_client
    tenant, other = await make_tenant(client), await make_tenant(client)
    for n in range(3):
        stored = await client.post(
            "/v1/memories", json={"content": f"Notiz {n}: Raum {n} ist frei."}, headers=tenant.write
        )
        assert stored.status_code == 201, stored.text
    refused = await client.post(
        "/v1/memories", json={"content": "Noch eine Notiz."}, headers=tenant.write
    )
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) >= 1
    assert "KNOWMIND_JOB_QUEUE_JOBS_PER_TENANT" in refused.json()["detail"]
    assert await count_rows(db, "memories", tenant.id) == 3  # nothing half-written
    assert await count_rows(db, "jobs", tenant.id) == 3
    # content stored already queues nothing: answered as before
    again = await client.post(
        "/v1/memories", json={"content": "Notiz 0: Raum 0 ist frei."}, headers=tenant.write
    )
    assert again.status_code == 200 and again.json()["status"] == "unchanged"
    # the batch endpoint, a document and the MCP upload tool are refused alike
    batch = await client.post(
        "/v1/memories/batch",
        json={"items": [{"content": "Satz eins."}, {"content": "Satz zwei."}]},
        headers=tenant.write,
    )
    assert batch.status_code == 429 and "retry-after" in batch.headers, batch.text
    doc = await client.post(
        "/v1/documents", json={"title": "Kurz", "content": "Ein kurzer Text."}, headers=tenant.write
    )
    assert doc.status_code == 429, doc.text
    is_error, payload = await call(
        client,
        tenant.write,
        "knowmind_upload_document",
        {"title": "Per MCP", "content": "Ein kurzer Text per MCP."},
    )
    assert is_error and "KNOWMIND_JOB_QUEUE_JOBS_PER_TENANT" in str(payload), payload
    assert await _rows(db, UUID(tenant.id), ("memories", "documents", "jobs", "chunks")) == {
        "memories": 3,
        "documents": 0,
        "jobs": 3,
        "chunks": 3,
    }
    # another tenant's queue is its own
    theirs = await client.post(
        "/v1/memories", json={"content": "Notiz von nebenan."}, headers=other.write
    )
    assert theirs.status_code == 201
    await _erase(client, tenant.id, other.id)  # their queued jobs are no later test's work


async def _erase(client: AsyncTestClient, *tenants: str) -> None:
    for tenant in tenants:
        erased = await client.delete(f"/v1/admin/tenants/{tenant}", headers=ADMIN_HEADERS)
        assert erased.status_code == 200, erased.text


async def test_large_documents_beyond_the_byte_quota_are_429(quota_client, db):
    client = quota_client
    tenant = await make_tenant(client)
    first = await client.post(
        "/v1/documents", json={"title": "Eins", "content": handbook(120)}, headers=tenant.write
    )
    assert first.status_code == 202, first.text
    queued = await count_rows(db, "jobs", tenant.id)
    second = await client.post(
        "/v1/documents", json={"title": "Zwei", "content": handbook(120)}, headers=tenant.write
    )
    assert second.status_code == 429, second.text
    assert int(second.headers["retry-after"]) >= 1
    assert "KNOWMIND_JOB_QUEUE_BYTES_PER_TENANT" in second.json()["detail"]
    assert await count_rows(db, "jobs", tenant.id) == queued  # nothing queued
    async with db.owner_tx() as conn:
        held = await job_store.queued_work(conn, UUID(tenant.id))
    assert 100_000 < held.payload_bytes <= 150_000
    # a small one is stored at once: only its extraction job is queued, no bytes to speak of
    small = await client.post(
        "/v1/documents", json={"title": "Klein", "content": "Kurz."}, headers=tenant.write
    )
    assert small.status_code == 201, small.text
    await _erase(client, tenant.id)


async def test_wait_is_bounded_by_its_timeout_and_answers_the_job_pending(settings, embedder):
    """No worker runs: ``?wait=true`` answers once the (default, 10 s) timeout passes, with
    the job still pending, not after half a minute."""
    assert settings.ingest.wait_timeout_seconds == 10.0
    quiet = settings.with_overrides(run_workers="off")
    async with AsyncTestClient(app=create_app(quiet, embedder=embedder)) as client:
        tenant = await make_tenant(client)
        started = time.monotonic()
        stored = await client.post(
            "/v1/memories?wait=true",
            json={"content": "Herr Weber prüft die Rechnung."},
            headers=tenant.write,
        )
        seconds = time.monotonic() - started
        await _erase(client, tenant.id)
    assert stored.status_code == 201, stored.text
    assert stored.json()["job"]["status"] == "pending"
    assert stored.json()["job"]["id"] == stored.json()["job_id"]
    assert 9.5 <= seconds < 13, seconds


# --- steps, lanes and turns ------------------------------------------------------------------


@pytest.fixture(scope="module")
async def runtime(settings, embedder) -> AsyncIterator[Runtime]:
    """A server's runtime with its job worker running (and no language model)."""
    # sentence vectors off: this worker also takes the jobs other tests left in the shared
    # database, whose sentence embedding would keep the process busy while it is measured for
    # quiet after an erasure (tests/test_sentence_vectors.py covers them)
    own = settings.with_overrides(
        job_poll_seconds=0.5,
        llm_provider="none",
        max_body_bytes=4 * 1024 * 1024,
        sentence_vectors="off",
    )
    started = await Runtime.start(own, embedder)
    started.start_workers()
    try:
        yield started
    finally:
        await started.close()


async def _progress(runtime: Runtime, tenant: UUID, job_id: UUID) -> int:
    job = await _job(runtime.database.db, tenant, job_id)
    assert job is not None
    return int((job.progress or {}).get("embedded", 0))


async def test_a_document_job_does_not_hold_up_other_tenants(runtime):
    """Tenant A's and C's large documents are embedded in steps, taking turns; tenant B's
    one-sentence memory is extracted within seconds while both documents are still under
    way (before issue 42 it waited for A's whole document)."""
    a, b, c = [await _new_tenant(runtime, n) for n in ("doc-a", "note-b", "doc-c")]
    jobs = {}
    for who in (a, c):
        accepted = await runtime.ingest.documents.upload(
            who, DocumentDraft(title="Handbuch", content=handbook(240)), background=True
        )
        assert accepted.status == "accepted" and accepted.job_id is not None
        jobs[who.tenant_id] = accepted.job_id

    async def both_started() -> bool:
        return all([await _progress(runtime, t, j) > 0 for t, j in jobs.items()])

    await _until(both_started, 60, "both documents embedding")  # interleaved, not one by one

    written = time.monotonic()
    note = await runtime.ingest.memories.remember(
        b, MemoryDraft(content="Frau Petra Lang leitet das Büro in Kassel.")
    )
    assert note.job_id is not None

    async def extracted() -> bool:
        job = await _job(runtime.database.db, b.tenant_id, note.job_id)
        return job is not None and job.status == "done"

    await _until(extracted, 30, "B's extraction", every_s=0.05)
    b_seconds = time.monotonic() - written
    states = [await _job(runtime.database.db, t, j) for t, j in jobs.items()]
    assert [s.status for s in states if s] == ["running", "running"], states
    assert b_seconds < 5, b_seconds
    for who in (a, c):  # the rest is not this test's business
        await runtime.admin.erasure.erase_tenant(who.tenant_id)


async def test_a_document_job_taken_over_resumes_where_it_stopped(settings, embedder, db):
    """A worker dies after some steps; the one that takes the job over embeds only the rest
    (the steps' vectors were kept), and the document is stored whole."""
    recording = RecordingModel(embedder)
    executor = EmbeddingExecutor(recording)
    documents = DocumentService(db, executor, settings.ingest, GraphService(db))
    async with db.owner_tx() as conn:
        tenant = (await create_tenant(conn, f"r-{uuid.uuid4().hex[:8]}", "german", "m", 384)).id
    draft = DocumentDraft(title="Handbuch", content=handbook(60))
    chunks = len(documents._server_chunks(draft))
    # a job of a kind only these workers know: the suite's own worker must not run it
    kind = f"ingest-{uuid.uuid4().hex[:8]}"
    async with db.owner_tx() as conn:
        payload = document_payload(draft, "german") | {"base_version": 0}
        job_id = await job_store.enqueue_job(conn, tenant, kind, payload)
    handler = DocumentIngestJob(documents, step_chunks=8)
    try:
        first = JobWorker(db, {kind: handler}, lease_seconds=1)
        for _ in range(3):  # three steps: three batches of 8 chunks
            assert await first.run_once() == 1
        assert sum(recording.passage_calls) == 24
        job = await _job(db, tenant, job_id)
        assert job is not None and job.progress == {"chunks": chunks, "embedded": 24}
        await asyncio.sleep(1.2)  # the first worker is gone: its lease runs out
        other = JobWorker(db, {kind: handler}, lease_seconds=1)
        while await other.run_once():
            pass
    finally:
        await executor.close()
    assert sum(recording.passage_calls) == chunks  # nothing embedded twice
    job = await _job(db, tenant, job_id)
    assert job is not None and job.status == "done", job
    assert job.result is not None and job.result["chunks"] == chunks
    assert await count_rows(db, "chunks", str(tenant)) == chunks
    assert await count_rows(db, "job_parts", str(tenant)) == 0  # forgotten once done


# --- cancellation ----------------------------------------------------------------------------


def _cpu_seconds() -> float:
    return time.process_time()


async def test_erasing_a_tenant_stops_its_running_job_at_once(runtime):
    """The erased tenant's document job stops within seconds (no step runs on, its embedding
    work is dropped, the process goes quiet, nothing more is written for it) and another
    tenant's job completes right after."""
    gone, stays = await _new_tenant(runtime, "gone"), await _new_tenant(runtime, "stays")
    accepted = await runtime.ingest.documents.upload(
        gone, DocumentDraft(title="Handbuch", content=handbook(240)), background=True
    )
    assert accepted.job_id is not None
    job_id = accepted.job_id

    async def embedding() -> bool:
        return await _progress(runtime, gone.tenant_id, job_id) > 0

    await _until(embedding, 60, "the document job embedding")
    receipt = await runtime.admin.erasure.erase_tenant(gone.tenant_id)
    assert receipt["erased"]["jobs"] >= 1
    erased_at = time.monotonic()

    async def let_go() -> bool:
        held = [t for t, _ in runtime.workers.jobs.held_jobs]
        waiting = runtime.models.embedder.waiting_passages().get(str(gone.tenant_id), 0)
        return gone.tenant_id not in held and waiting == 0

    await _until(let_go, 3, "the worker letting the erased tenant's job go", every_s=0.05)
    await asyncio.sleep(1.5)  # the batch under way when it was erased (if any) ends
    cpu, wall = _cpu_seconds(), time.monotonic()
    await asyncio.sleep(2.0)
    busy = (_cpu_seconds() - cpu) / (time.monotonic() - wall)
    assert busy < 0.25, f"the process still works for the erased tenant: {busy:.0%} CPU"
    tables = ("jobs", "job_parts", "documents", "memories", "chunks")
    assert set((await _rows(runtime.database.db, gone.tenant_id, tables)).values()) == {0}

    note = await runtime.ingest.memories.remember(
        stays, MemoryDraft(content="Herr Brandt übernimmt.")
    )
    assert note.job_id is not None

    async def extracted() -> bool:
        job = await _job(runtime.database.db, stays.tenant_id, note.job_id)
        return job is not None and job.status == "done"

    await _until(extracted, 10, "another tenant's job after the erasure", every_s=0.05)
    assert time.monotonic() - erased_at < 15


async def test_erasing_a_document_cancels_its_queued_replacement(runtime):
    """A large upload replacing a document is being embedded; erasing the document cancels
    that job: its row and parts go, and nothing is stored for it afterwards."""
    who = await _new_tenant(runtime, "doc-erase")
    first = await runtime.ingest.documents.upload(who, DocumentDraft(title="Akte", content="Kurz."))
    assert first.status == "created" and first.id is not None
    replacing = await runtime.ingest.documents.upload(
        who, DocumentDraft(title="Akte", content=handbook(240)), background=True
    )
    assert replacing.job_id is not None
    job_id = replacing.job_id

    async def embedding() -> bool:
        return await _progress(runtime, who.tenant_id, job_id) > 0

    await _until(embedding, 60, "the replacing upload embedding")
    receipt = await runtime.admin.erasure.erase_document(who, first.id)
    assert receipt["erased"]["jobs"] >= 2  # its extraction and the replacing upload
    assert await _job(runtime.database.db, who.tenant_id, job_id) is None

    async def let_go() -> bool:
        return (who.tenant_id, job_id) not in runtime.workers.jobs.held_jobs

    await _until(let_go, 3, "the worker letting the job go", every_s=0.05)
    await asyncio.sleep(2.0)
    tables = ("documents", "memories", "chunks", "job_parts")
    assert set((await _rows(runtime.database.db, who.tenant_id, tables)).values()) == {0}


class EndlessSteps:
    """Test double: a job handler whose job never ends; it records its steps (from the third
    one on, each takes seconds: an erasure lands in one of them)."""

    def __init__(self) -> None:
        self.steps = 0
        self.cancelled = 0

    async def __call__(self, tenant_id: UUID, payload: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("runs in steps")

    async def step(self, job: JobRow, state: dict[str, Any]) -> JobStep:
        self.steps += 1
        try:
            await asyncio.sleep(0.05 if self.steps < 3 else 5.0)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return JobStep(done=False, progress={"steps": self.steps})


@pytest.mark.parametrize("told", [True, False], ids=["told", "watching"])
async def test_erasing_a_memory_cancels_its_running_job(db, told):
    """The memory's job stops at its step under way: at once when the erasure tells the
    worker, within a second when only the worker's watch sees the row gone (an erasure
    made by another process)."""
    kind = f"endless-{uuid.uuid4().hex[:8]}"
    handler = EndlessSteps()
    worker = JobWorker(db, {kind: handler}, poll_seconds=0.05, watch_seconds=0.5)
    erasure = ErasureService(
        db, GraphService(db), mirror_enabled=False, on_jobs_cancelled=worker.cancel
    )
    if not told:
        erasure.on_jobs_cancelled = lambda tenant, jobs: None
    async with db.owner_tx() as conn:
        tenant = (await create_tenant(conn, f"m-{uuid.uuid4().hex[:8]}", "german", "m", 384)).id
    who = Principal(tenant, frozenset({"write"}), language="german")
    async with db.tenant_tx(tenant, write=True) as conn:
        memory_id = await conn.scalar(
            text(
                "INSERT INTO memories (tenant_id, content, content_sha256) "
                "VALUES (:t, 'Notiz', sha256('endless'::bytea)) RETURNING id"
            ),
            {"t": tenant},
        )
        job_id = await job_store.enqueue_job(conn, tenant, kind, {"memory_id": str(memory_id)})
    running = asyncio.ensure_future(worker.run_forever())
    try:
        await _until(lambda: _async(handler.steps >= 3), 10, "the job stepping", 0.02)
        receipt = await erasure.erase_memory(who, memory_id)
        assert receipt["erased"]["jobs"] == 1
        erased_at = time.monotonic()
        await _until(
            lambda: _async((tenant, job_id) not in worker.held_jobs), 3, "the job let go", 0.02
        )
        seconds = time.monotonic() - erased_at
        steps = handler.steps
        await asyncio.sleep(0.6)
        assert handler.steps == steps == 3  # no further step
        assert handler.cancelled == 1  # the step under way was cancelled, not waited for
        assert seconds < (0.3 if told else 1.5), seconds
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    assert await _job(db, tenant, job_id) is None


async def _async(value: bool) -> bool:
    return value


async def test_a_stopping_worker_hands_its_jobs_back_with_their_progress(db):
    """A worker shut down mid-job gives the job back at once (due again, its progress kept,
    the claim not counted as an attempt) rather than leaving it to a lease running out."""
    kind = f"endless-{uuid.uuid4().hex[:8]}"
    handler = EndlessSteps()
    worker = JobWorker(db, {kind: handler}, poll_seconds=0.05)
    async with db.owner_tx() as conn:
        tenant = (await create_tenant(conn, f"h-{uuid.uuid4().hex[:8]}", "german", "m", 384)).id
        job_id = await job_store.enqueue_job(conn, tenant, kind, {"n": 1})
    running = asyncio.ensure_future(worker.run_forever())
    await _until(lambda: _async(handler.steps >= 3), 10, "the job stepping", 0.02)
    running.cancel()
    await asyncio.gather(running, return_exceptions=True)
    job = await _job(db, tenant, job_id)
    assert job is not None
    assert (job.status, job.attempts, job.progress) == ("pending", 0, {"steps": 2})
    assert handler.cancelled == 1
