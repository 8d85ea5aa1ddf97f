"""Large documents in the background: 202 with a job at once, the job worker stores the document
(real embedding, real PostgreSQL), the job's result names it; ``?wait=true`` holds the request;
what can be refused at once (an unknown ``replace_document_id``) is refused at once."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy import text

from tests.conftest import count_rows

SECTIONS = [
    f"## Abschnitt {i}\n\nDer Standort {i} meldet Wartungsfenster am Dienstag um {i % 24} Uhr; "
    f"die Ansprechpartnerin für Standort {i} ist Frau Berger-{i}, erreichbar über das "
    "Ticketsystem. Ersatzteile liegen im Lager Kassel, Regal {i}, und werden nach Bedarf "
    "versandt. Änderungen am Wartungsplan kündigt der Betrieb eine Woche vorher an, damit "
    "die Teams ihre Arbeit planen können. " * 3
    for i in range(24)
]
LARGE = "# Wartungshandbuch\n\n" + "\n\n".join(SECTIONS)


async def _finished_job(client, tenant, job_id: str, timeout_s: float = 120) -> dict:
    for _ in range(int(timeout_s / 0.2)):
        job = (await client.get(f"/v1/jobs/{job_id}", headers=tenant.read)).json()
        if job["status"] in ("done", "failed"):
            return job
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish: {job}")


async def test_a_large_document_is_accepted_and_stored_by_a_job(client, tenant, db):
    answer = await client.post(
        "/v1/documents", json={"title": "Wartung", "content": LARGE}, headers=tenant.write
    )
    assert answer.status_code == 202, answer.text
    accepted = answer.json()
    assert accepted["status"] == "accepted" and accepted["id"] is None
    assert accepted["chunks"] > 32 and accepted["job_id"]

    job = await _finished_job(client, tenant, accepted["job_id"])
    assert job["status"] == "done", job
    result = job["result"]
    assert result["status"] == "created" and result["chunks"] == accepted["chunks"]
    memory = await client.get(f"/v1/memories/{result['memory_id']}", headers=tenant.read)
    assert memory.status_code == 200 and memory.json()["content"] == LARGE
    assert await count_rows(db, "chunks", tenant.id) == accepted["chunks"]

    found = await client.post(
        "/v1/recall",
        json={"query": "Wer ist Ansprechpartnerin für Standort 17?", "k": 3},
        headers=tenant.read,
    )
    assert found.json()["results"][0]["memory_id"] == result["memory_id"]

    # the same upload again is answered at once: stored already, nothing to embed or queue
    jobs = await count_rows(db, "jobs", tenant.id)
    again = await client.post(
        "/v1/documents", json={"title": "Wartung", "content": LARGE}, headers=tenant.write
    )
    assert again.status_code == 200 and again.json()["status"] == "unchanged"
    assert again.json()["id"] == result["document_id"]
    assert await count_rows(db, "jobs", tenant.id) == jobs
    assert await count_rows(db, "chunks", tenant.id) == accepted["chunks"]
    # the finished job no longer holds the text (an erasure must not leave it behind)
    async with db.owner_tx() as conn:
        payload = (
            await conn.execute(
                text("SELECT payload FROM jobs WHERE id = :j"), {"j": accepted["job_id"]}
            )
        ).scalar_one()
    assert payload == {}


async def test_a_queued_upload_does_not_overwrite_a_newer_version(client, settings, embedder, db):
    """v1 (large) is accepted, v2 (small, same title) is stored before v1's job runs: the job
    answers superseded and v2 stays. The service and a worker of this test's own (the app's
    worker would run the job at once)."""
    from knowmind.models.executor import EmbeddingExecutor
    from knowmind.services.auth import Principal
    from knowmind.services.document_jobs import DocumentIngestJob
    from knowmind.services.documents import INGEST_DOCUMENT_JOB, DocumentDraft, DocumentService
    from knowmind.services.graph import GraphService
    from knowmind.workers.jobs import JobWorker
    from tests.conftest import make_tenant

    tenant = await make_tenant(client)
    who = Principal(uuid.UUID(tenant.id), frozenset({"write"}), language="german")
    executor = EmbeddingExecutor(embedder)
    documents = DocumentService(db, executor, settings.ingest, GraphService(db))
    try:
        v1 = await documents.upload(
            who, DocumentDraft(title="Spec", content=LARGE), background=True
        )
        assert v1.status == "accepted" and v1.job_id is not None
        v2 = await documents.upload(who, DocumentDraft(title="Spec", content=SECTIONS[1]))
        assert v2.status == "created"
        worker = JobWorker(db, {INGEST_DOCUMENT_JOB: DocumentIngestJob(documents)})
        while await worker.run_once():
            pass
    finally:
        await executor.close()
    # the suite's server runs a job worker too: whichever worker took the job, it must be done
    job = await _finished_job(client, tenant, str(v1.job_id))
    assert job["status"] == "done" and job["result"]["status"] == "superseded"
    memory = await client.get(f"/v1/memories/{v2.memory_id}", headers=tenant.read)
    assert memory.json()["content"] == SECTIONS[1]


async def test_wait_holds_the_request_and_bad_references_are_refused_at_once(client, tenant, db):
    held = await client.post(
        "/v1/documents?wait=true",
        json={"title": "Wartung sofort", "content": LARGE},
        headers=tenant.write,
    )
    assert held.status_code == 201, held.text
    assert held.json()["status"] == "created" and held.json()["id"]

    unknown = await client.post(
        "/v1/documents",
        json={"content": LARGE, "replace_document_id": str(uuid.uuid4())},
        headers=tenant.write,
    )
    assert unknown.status_code == 404 and "replace_document_id" in unknown.json()["detail"]
    jobs = await count_rows(db, "jobs", tenant.id)
    small = await client.post(
        "/v1/documents", json={"title": "Kurz", "content": SECTIONS[0]}, headers=tenant.write
    )
    assert small.status_code == 201  # small documents are stored before the answer
    assert await count_rows(db, "jobs", tenant.id) == jobs + 1  # its extraction job only
