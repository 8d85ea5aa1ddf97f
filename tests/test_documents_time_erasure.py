"""Documents (upsert by title, Markdown chunks, knowmind's upload), bi-temporal facts with
recall as of a time, stats and health, and erasure that leaves nothing behind."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import numpy as np
from sqlalchemy import text

from tests.conftest import ADMIN_HEADERS, count_rows, make_tenant, off_thread

HANDBOOK = """# Betriebshandbuch Kassel

Das Lager in Kassel ist werktags von sechs bis zweiundzwanzig Uhr besetzt.

## Backups

Backups laufen jede Nacht um zwei Uhr.

```bash
pg_dump -Fc lager > /backup/lager.dump
```

| Host | Rolle |
|------|-------|
| ks-db-1 | Datenbank |
| ks-app-2 | Anwendung |
"""


async def test_document_upsert_by_title_keeps_one_version(client, tenant, db):
    first = await client.post(
        "/v1/documents", json={"title": "Handbuch", "content": HANDBOOK}, headers=tenant.write
    )
    assert first.status_code == 201, first.text
    assert first.json()["chunks"] >= 2
    same = await client.post(
        "/v1/documents", json={"title": "Handbuch", "content": HANDBOOK}, headers=tenant.write
    )
    assert same.json()["status"] == "unchanged"
    changed = HANDBOOK.replace("zwei Uhr", "drei Uhr")
    second = await client.post(
        "/v1/documents", json={"title": "handbuch", "content": changed}, headers=tenant.write
    )
    assert second.status_code == 200 and second.json()["status"] == "replaced"
    assert second.json()["id"] == first.json()["id"]  # the document id is stable
    assert await count_rows(db, "documents", tenant.id) == 1
    assert await count_rows(db, "memories", tenant.id) == 1
    async with db.owner_tx() as conn:
        chunks = list(
            (
                await conn.execute(
                    text("SELECT content FROM chunks WHERE tenant_id = :t"), {"t": tenant.id}
                )
            ).scalars()
        )
    assert not any("zwei Uhr" in c for c in chunks) and any("drei Uhr" in c for c in chunks)
    # headings start chunks; the code block and the table stay whole
    assert any(c.startswith("Betriebshandbuch Kassel > Backups") for c in chunks)
    assert any("pg_dump" in c and c.count("```") == 2 for c in chunks)
    assert any("ks-db-1" in c and "ks-app-2" in c for c in chunks)
    body = (
        await client.post(
            "/v1/recall", json={"query": "Wann laufen die Backups?"}, headers=tenant.read
        )
    ).json()
    assert "drei Uhr" in body["results"][0]["content"]


async def test_knowmind_upload_uses_client_embeddings_only_when_they_fit(client, tenant, embedder):
    text_ = "Die Kantine in Kassel öffnet um elf Uhr."
    vector = embedder.embed_passages([text_])[0].tolist()
    used = await client.post(
        "/api/documents",
        json={
            "title": "Kantine",
            "content": text_,
            "embeddingModel": embedder.model_id,
            "chunks": [{"content": text_, "embedding": vector}],
        },
        headers=tenant.write,
    )
    assert used.status_code == 201, used.text
    assert used.json()["embeddedBy"] == "client" and used.json()["chunks"] == 1
    assert used.json()["embeddingProvider"] == "client" and used.json()["chunksWritten"] == 1
    assert used.json()["embeddingNote"] is None and used.json()["unchanged"] is False
    other_model = await client.post(
        "/api/documents",
        json={
            "title": "Kantine 2",
            "content": text_,
            "embeddingModel": "Xenova/multilingual-e5-large",  # the client's default: 1024-d
            "chunks": [{"content": text_, "embedding": [0.1] * 1024}],
        },
        headers=tenant.write,
    )
    refused = other_model.json()
    assert refused["embeddedBy"] == refused["embeddingProvider"] == "server"
    assert "Xenova/multilingual-e5-large" in refused["embeddingNote"]  # said, never silent
    assert embedder.model_id in refused["embeddingNote"]
    same_again = await client.post(
        "/api/documents",
        json={"title": "Kantine 2", "content": text_},
        headers=tenant.write,
    )
    assert same_again.json()["unchanged"] is True and same_again.json()["duplicate"] is True
    # an export of this server's model under another name is the same model
    export = await client.post(
        "/api/documents",
        json={
            "title": "Kantine 3",
            "content": text_ + " Auch samstags.",
            "embeddingModel": "Xenova/multilingual-e5-small",
            "chunks": [{"content": text_, "embedding": vector}],
        },
        headers=tenant.write,
    )
    assert export.json()["embeddingProvider"] == "client", export.text
    replaced = await client.post(
        "/api/documents",
        json={
            "content": "Neu: die Kantine öffnet um zwölf.",
            "replaceDocumentId": used.json()["id"],
        },
        headers=tenant.write,
    )
    assert replaced.json()["id"] == used.json()["id"] and replaced.json()["status"] == "replaced"
    bad = await client.post("/api/documents", json={"title": "x"}, headers=tenant.write)
    assert bad.status_code == 422 and "content" in bad.json()["error"]
    unauthorised = await client.post("/api/documents", json={"content": "x"})
    assert unauthorised.status_code == 401 and "error" in unauthorised.json()
    assert np.isfinite(vector).all()


async def test_update_fact_and_recall_as_of(client, tenant):
    old = await client.post(
        "/v1/memories",
        json={"title": "Lagerleitung", "content": "Die Lagerleitung in Kassel hat Herr Brandt."},
        headers=tenant.write,
    )
    before = datetime.now(UTC)
    await asyncio.sleep(0.05)
    new = await client.post(
        f"/v1/memories/{old.json()['id']}/supersede",
        json={
            "new_title": "Lagerleitung",
            "new_content": "Die Lagerleitung in Kassel hat Frau Yilmaz.",
            "update_reason": "Herr Brandt ist in Rente",
        },
        headers=tenant.write,
    )
    assert new.status_code == 201, new.text
    await asyncio.sleep(0.05)
    after = datetime.now(UTC)
    query = {"query": "Wer leitet das Lager in Kassel?", "k": 3}
    now = (await client.post("/v1/recall", json=query, headers=tenant.read)).json()
    assert now["results"][0]["memory_id"] == new.json()["id"]
    assert old.json()["id"] not in [r["memory_id"] for r in now["results"]]
    then = (
        await client.post(
            "/v1/recall", json={**query, "as_of": before.isoformat()}, headers=tenant.read
        )
    ).json()
    assert then["results"][0]["memory_id"] == old.json()["id"]
    assert new.json()["id"] not in [r["memory_id"] for r in then["results"]]
    later = (
        await client.post(
            "/v1/recall", json={**query, "as_of": after.isoformat()}, headers=tenant.read
        )
    ).json()
    assert later["results"][0]["memory_id"] == new.json()["id"]
    known = (
        await client.post(
            "/v1/recall", json={**query, "known_at": before.isoformat()}, headers=tenant.read
        )
    ).json()
    assert known["results"][0]["memory_id"] == old.json()["id"]
    assert new.json()["id"] not in [r["memory_id"] for r in known["results"]]
    rels = await client.get(f"/v1/nodes/{new.json()['id']}/relations", headers=tenant.read)
    assert {(r["predicate"], r["node"]["id"]) for r in rels.json()["relations"]} >= {
        ("SUPERSEDES", old.json()["id"])
    }
    history = await client.get(f"/v1/memories/{old.json()['id']}", headers=tenant.read)
    assert history.status_code == 200 and history.json()["valid_to"] is not None
    again = await client.post(
        f"/v1/memories/{old.json()['id']}/supersede",
        json={"new_content": "x"},
        headers=tenant.write,
    )
    assert again.status_code == 409


async def test_stats_and_health_detail(client, tenant):
    await client.post(
        "/v1/memories?wait=true",
        json={"content": "Die Beispiel AG zahlt pünktlich."},
        headers=tenant.write,
    )
    stats = (await client.get("/v1/stats", headers=tenant.read)).json()
    assert stats["memories"] == 1 and stats["chunks"] == 1 and stats["entities"] >= 1
    assert stats["pending_jobs"] == 0
    assert (await client.get("/health/detail")).status_code == 401  # every tenant's backlog
    assert (await client.get("/health/detail", headers=tenant.admin)).status_code == 403
    health = (await client.get("/health/detail", headers=ADMIN_HEADERS)).json()
    assert health["postgres"]["status"] == "ok"
    assert health["embedder"]["status"] == "ok"
    assert health["graph_mirror"] == {"status": "disabled"}
    assert health["reranker"]["status"] == "disabled"  # with the reason
    assert health["job_worker"]["status"] == "ok"


SECRET = "Frau Ilse Quandtmann wohnt in der Ahornstraße 17 in Kassel."

# Every tenant table, searched as whole rows (text, vectors, tsvectors, JSON payloads).
SCAN = (
    "memories",
    "chunks",
    "entities",
    "entity_names",
    "documents",
    "jobs",
    "graph_outbox",
    "edges",
    "mentions",
    "chunk_terms",
    "chunk_sentences",
    "bm25_lexemes",
    "bm25_corpus",
)


async def traces(db, tenant_id: str, needles: list[str]) -> dict[str, int]:
    found = {}
    async with db.owner_tx() as conn:
        for table in SCAN:
            for needle in needles:
                hits = await conn.scalar(
                    text(
                        f"SELECT count(*) FROM {table} WHERE tenant_id = :t "
                        f"AND (row_to_json({table})::text ILIKE :n)"
                    ),
                    {"t": tenant_id, "n": f"%{needle}%"},
                )
                if hits:
                    found[f"{table}:{needle}"] = hits
    return found


async def test_erasing_a_memory_leaves_no_trace(client, tenant, db):
    keep = await client.post(
        "/v1/memories?wait=true",
        json={"content": "Die Quandt AG ist unser Lieferant."},
        headers=tenant.write,
    )
    gone = await client.post(
        "/v1/memories?wait=true",
        json={
            "title": "Ilse Quandtmann",
            "content": SECRET,
            "relations": [
                {
                    "predicate": "HAS_SKILL",
                    "subject": "Ilse Quandtmann",
                    "subject_class": "Person",
                    "object": "Buchhaltung",
                    "object_class": "Skill",
                }
            ],
        },
        headers=tenant.write,
    )
    memory_id = gone.json()["id"]
    receipt = await client.delete(f"/v1/memories/{memory_id}?erase=true", headers=tenant.write)
    assert receipt.status_code == 200, receipt.text
    erased = receipt.json()["erased"]
    assert erased["memories"] == 1 and erased["chunks"] == 1 and erased["vectors"] == 1
    assert erased["entities"] >= 2  # Ilse Quandtmann and Buchhaltung existed only for it
    assert erased["edges"] >= 2 and erased["mentions"] >= 2
    assert await traces(db, tenant.id, ["Quandtmann", "Ahornstra", memory_id]) == {}
    assert (
        await client.get(f"/v1/memories/{keep.json()['id']}", headers=tenant.read)
    ).status_code == 200
    body = (
        await client.post(
            "/v1/recall", json={"query": "Wo wohnt Ilse Quandtmann?"}, headers=tenant.read
        )
    ).json()
    assert memory_id not in [r["memory_id"] for r in body["results"]]


async def test_erasing_a_document_and_a_tenant(client, db):
    tenant = await make_tenant(client)
    doc = await client.post(
        "/v1/documents?", json={"title": "Akte Quandtmann", "content": SECRET}, headers=tenant.write
    )
    receipt = await client.delete(
        f"/v1/documents/{doc.json()['id']}?erase=true", headers=tenant.write
    )
    assert receipt.json()["erased"]["documents"] == 1
    assert await traces(db, tenant.id, ["Quandtmann", doc.json()["id"]]) == {}

    await client.post("/v1/memories?wait=true", json={"content": SECRET}, headers=tenant.write)
    whole = await client.delete(f"/v1/admin/tenants/{tenant.id}", headers=ADMIN_HEADERS)
    assert whole.status_code == 200, whole.text
    erased = whole.json()["erased"]
    assert erased["tenants"] == 1 and erased["memories"] == 1 and erased["api_tokens"] == 3
    async with db.owner_tx() as conn:
        for table in [*SCAN, "api_tokens", "ontology_classes", "ontology_predicates"]:
            left = await conn.scalar(
                text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"), {"t": tenant.id}
            )
            assert left == 0, table
    assert (await client.get("/v1/memories", headers=tenant.read)).status_code == 401
    missing = await client.delete(f"/v1/admin/tenants/{uuid.uuid4()}", headers=ADMIN_HEADERS)
    assert missing.status_code == 404


async def test_concurrent_supersede_and_delete_of_one_memory_never_fail(client, tenant):
    """Both write chunks (and so the tenant's BM25 statistics) and lock the memory: without one
    lock order per tenant they deadlock and one of them answers 500."""
    for round_ in range(6):
        stored = await client.post(
            "/v1/memories",
            json={"content": f"Der Vertrag {round_} läuft bis Ende März."},
            headers=tenant.write,
        )
        memory_id = stored.json()["id"]
        supersede, delete = await asyncio.gather(
            off_thread(
                client.post(
                    f"/v1/memories/{memory_id}/supersede",
                    json={"new_content": f"Der Vertrag {round_} läuft bis Ende Juni."},
                    headers=tenant.write,
                )
            ),
            off_thread(client.delete(f"/v1/memories/{memory_id}", headers=tenant.write)),
        )
        assert supersede.status_code in (201, 404), supersede.text
        assert delete.status_code in (204, 404), delete.text


async def test_write_transactions_of_one_tenant_take_turns(db, tenant):
    """The tenant write lock: a second write transaction of the same tenant waits for the
    first (so all of them lock rows in one order); another tenant's does not wait."""
    first_done = asyncio.Event()
    async with db.tenant_tx(uuid.UUID(tenant.id), write=True):

        async def second() -> bool:
            async with db.tenant_tx(uuid.UUID(tenant.id), write=True):
                return first_done.is_set()

        waiting = asyncio.create_task(second())
        async with db.tenant_tx(uuid.uuid4(), write=True):  # another tenant: no wait
            pass
        await asyncio.sleep(0.3)
        assert not waiting.done()
        first_done.set()
    assert await waiting
