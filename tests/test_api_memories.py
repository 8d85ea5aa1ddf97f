"""Remember → recall round trips over HTTP against real PostgreSQL and the real embedder."""

from __future__ import annotations

import asyncio

from litestar.testing import AsyncTestClient

from tests.conftest import TenantAccess, count_rows, off_thread

GERMAN_MEMORIES = [
    {
        "title": "Anna Schmidt",
        "content": "Anna Schmidt arbeitet seit 2019 als Projektleiterin bei der Siemens AG "
        "in München und betreut dort die Modernisierung der Netzleittechnik.",
        "tags": ["people", "siemens"],
        "memory_type": "semantic",
        "source": "crm",
    },
    {
        "title": "Patchfenster web-01",
        "content": "Der Server web-01 läuft auf Debian 12. Sicherheitsupdates werden jeden "
        "Sonntag um drei Uhr nachts eingespielt, danach startet der Dienst neu.",
        "tags": ["ops"],
        "memory_type": "procedural",
        "source": "runbook",
    },
    {
        "title": "Zahlungsbedingungen Müller GmbH",
        "content": "Die Müller GmbH bezahlt Rechnungen grundsätzlich mit einem Zahlungsziel "
        "von dreißig Tagen; Skonto wird nicht gewährt.",
        "tags": ["finance", "customers"],
        "memory_type": "reference",
        "source": "erp",
    },
]


async def remember_all(client: AsyncTestClient, tenant: TenantAccess) -> list[str]:
    ids = []
    for memory in GERMAN_MEMORIES:
        # wait for extraction: the graph stage then sees the same graph on every run
        response = await client.post("/v1/memories?wait=true", json=memory, headers=tenant.write)
        assert response.status_code == 201, response.text
        assert response.json()["status"] == "created"
        ids.append(response.json()["id"])
    return ids


async def recall(client: AsyncTestClient, tenant: TenantAccess, **body: object) -> dict:
    response = await client.post("/v1/recall", json=body, headers=tenant.read)
    assert response.status_code == 200, response.text
    return response.json()


async def test_german_and_english_questions_find_the_german_memory(client, tenant):
    ids = await remember_all(client, tenant)
    questions = {
        "Bei welcher Firma arbeitet Anna Schmidt?": ids[0],
        "Where does Anna Schmidt work?": ids[0],
        "Wann werden auf web-01 Updates installiert?": ids[1],
        "When does the web-01 server get its security patches?": ids[1],
        "Welches Zahlungsziel hat die Müller GmbH?": ids[2],
        "What payment terms does the Müller company have?": ids[2],
    }
    for question, expected in questions.items():
        body = await recall(client, tenant, query=question, k=3)
        assert body["results"][0]["memory_id"] == expected, question
        assert body["degraded"] is False


async def test_recall_result_shape_and_stage_ranks(client, tenant):
    ids = await remember_all(client, tenant)
    body = await recall(
        client,
        tenant,
        query="Zahlungsziel der Müller GmbH",
        k=2,
        stages=["bm25", "vector"],
        fusion="rrf",
    )
    top = body["results"][0]
    assert top["memory_id"] == ids[2]
    assert set(top) >= {
        "memory_id",
        "chunk_id",
        "title",
        "content",
        "source",
        "created_at",
        "score",
        "stages",
    }
    # German question on German text: both stages found it, and the fused score is RRF k=60;
    # the stages not asked for did not run.
    assert top["stages"] == {
        "statements": None,
        "bm25": 1,
        "vector": 1,
        "graph": None,
        "identity": None,
        "relations": None,
        "time": None,
    }
    # the fused score is RRF k=60, as a share of the best possible (first in both stages); the
    # score is the ranker's probability that the memory answers
    assert top["fused"] == 1.0 and 0.0 <= top["score"] <= 1.0
    # queue: the wait for the admission gate (KNOWMIND_RECALL_CONCURRENCY), here none
    assert {"bm25", "vector", "embed", "fuse", "rank", "queue", "total"} <= set(body["timings_ms"])
    assert body["timings_ms"]["queue"] < body["timings_ms"]["total"]
    assert len(body["results"]) == 2
    assert body["ranker"] == "learned"


async def test_english_question_on_german_text_comes_from_the_vector_stage(client, tenant):
    ids = await remember_all(client, tenant)
    body = await recall(client, tenant, query="payment deadline of thirty days", k=3)
    assert body["results"][0]["memory_id"] == ids[2]
    assert body["results"][0]["stages"]["vector"] == 1


async def test_filters(client, tenant):
    ids = await remember_all(client, tenant)
    query = "Server Updates Sonntag"
    by_type = await recall(client, tenant, query=query, k=5, filters={"memory_type": "reference"})
    assert [r["memory_id"] for r in by_type["results"]] == [ids[2]]
    by_tags = await recall(
        client, tenant, query=query, k=5, filters={"tags": ["people", "siemens"]}
    )
    assert [r["memory_id"] for r in by_tags["results"]] == [ids[0]]
    partial_tags = await recall(
        client, tenant, query=query, k=5, filters={"tags": ["people", "ops"]}
    )
    assert partial_tags["results"] == []  # tags are all-of
    by_source = await recall(client, tenant, query=query, k=5, filters={"source": "runbook"})
    assert [r["memory_id"] for r in by_source["results"]] == [ids[1]]


async def test_identical_content_is_stored_once(client, tenant, db):
    first = await client.post("/v1/memories", json=GERMAN_MEMORIES[0], headers=tenant.write)
    again = await client.post(
        "/v1/memories",
        json={**GERMAN_MEMORIES[0], "title": "another title"},
        headers=tenant.write,
    )
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json() == {
        "id": first.json()["id"],
        "status": "unchanged",
        "chunks": first.json()["chunks"],
        "job_id": None,  # nothing new to extract
        "job": None,
    }
    assert await count_rows(db, "memories", tenant.id) == 1


async def test_same_content_in_two_tenants_is_two_memories(client, tenant, other_tenant):
    a = await client.post("/v1/memories", json=GERMAN_MEMORIES[0], headers=tenant.write)
    b = await client.post("/v1/memories", json=GERMAN_MEMORIES[0], headers=other_tenant.write)
    assert a.status_code == b.status_code == 201
    assert a.json()["id"] != b.json()["id"]


async def test_get_list_and_delete(client, tenant, db):
    ids = await remember_all(client, tenant)
    got = await client.get(f"/v1/memories/{ids[1]}", headers=tenant.read)
    assert got.status_code == 200
    assert got.json()["title"] == GERMAN_MEMORIES[1]["title"]
    assert got.json()["memory_type"] == "procedural"

    page1 = await client.get("/v1/memories", params={"limit": 2}, headers=tenant.read)
    assert [m["id"] for m in page1.json()["items"]] == [ids[2], ids[1]]  # newest first
    page2 = await client.get(
        "/v1/memories",
        params={"limit": 2, "cursor": page1.json()["next_cursor"]},
        headers=tenant.read,
    )
    assert [m["id"] for m in page2.json()["items"]] == [ids[0]]
    assert page2.json()["next_cursor"] is None

    async def listed(**params) -> list[str]:
        page = await client.get("/v1/memories", params=params, headers=tenant.read)
        assert page.status_code == 200, page.text
        return [m["id"] for m in page.json()["items"]]

    assert await listed(memory_type="procedural") == [ids[1]]
    assert await listed(source="erp") == [ids[2]]
    assert await listed(tag=["people", "siemens"]) == [ids[0]]
    assert await listed(tag=["people", "ops"]) == []  # every tag, not any
    assert await listed(memory_type="semantic", source="runbook") == []
    assert await listed(speaker="nobody") == []

    chunks_before = await count_rows(db, "chunks", tenant.id)
    deleted = await client.delete(f"/v1/memories/{ids[1]}", headers=tenant.write)
    assert deleted.status_code == 204
    assert await count_rows(db, "chunks", tenant.id) == chunks_before - 1
    assert (await client.get(f"/v1/memories/{ids[1]}", headers=tenant.read)).status_code == 404
    body = await recall(client, tenant, query="web-01 Sicherheitsupdates Sonntag", k=5)
    assert ids[1] not in [r["memory_id"] for r in body["results"]]


async def test_long_content_is_chunked_and_each_chunk_is_searchable(client, tenant, db):
    filler = " ".join(
        f"Absatz {i} beschreibt die Wartung der Anlage Nummer {i} in aller Ausführlichkeit."
        for i in range(60)
    )
    content = filler + " Der Notfallkontakt für das Rechenzentrum Nord ist Herr Okonkwo."
    created = await client.post(
        "/v1/memories",
        json={"title": "Wartungshandbuch", "content": content},
        headers=tenant.write,
    )
    assert created.status_code == 201
    assert created.json()["chunks"] > 3
    assert await count_rows(db, "chunks", tenant.id) == created.json()["chunks"]
    body = await recall(client, tenant, query="Notfallkontakt Rechenzentrum Nord", k=1)
    assert "Okonkwo" in body["results"][0]["content"]


async def test_twenty_concurrent_remembers_are_all_found(client, tenant):
    topics = [
        "Raumfahrt",
        "Imkerei",
        "Segelflug",
        "Orgelbau",
        "Käserei",
        "Glasbläserei",
        "Vulkanologie",
        "Schach",
        "Bergbau",
        "Weinbau",
        "Uhrmacherei",
        "Bogenschießen",
        "Kartografie",
        "Töpferei",
        "Astronomie",
        "Hufschmiede",
        "Fischerei",
        "Papierherstellung",
        "Falknerei",
        "Brauerei",
    ]
    bodies = [
        {"title": topic, "content": f"Notiz {i}: Heute habe ich viel über {topic} gelernt."}
        for i, topic in enumerate(topics)
    ]
    responses = await asyncio.gather(
        *(off_thread(client.post("/v1/memories", json=b, headers=tenant.write)) for b in bodies)
    )
    assert [r.status_code for r in responses] == [201] * 20
    ids = {topic: r.json()["id"] for topic, r in zip(topics, responses, strict=True)}
    listed = await client.get("/v1/memories", params={"limit": 100}, headers=tenant.read)
    assert {m["id"] for m in listed.json()["items"]} == set(ids.values())
    for topic, memory_id in ids.items():
        found = await recall(client, tenant, query=f"Was habe ich über {topic} gelernt?", k=3)
        assert memory_id in [r["memory_id"] for r in found["results"]], topic
