"""The knowledge graph over HTTP: ontology checks, inverses, derived edges, inline relations,
extraction at ingest, tenant isolation."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from sqlalchemy import text

from knowmind.store import edges as edge_store
from knowmind.store import entities as entity_store
from knowmind.store import memories as memory_store
from knowmind.store.sentences import set_sentence_vectors
from tests.conftest import ADMIN_HEADERS, TenantAccess, count_rows, make_tenant, off_thread


async def entity(client, tenant: TenantAccess, name: str, cls: str, **extra) -> str:
    response = await client.post(
        "/v1/entities", json={"name": name, "entity_class": cls, **extra}, headers=tenant.write
    )
    assert response.status_code in (200, 201), response.text
    return response.json()["id"]


async def link(client, tenant, a: str, predicate: str, b: str, expect: int = 200):
    response = await client.post(
        "/v1/relations",
        json={"from_id": a, "to_id": b, "rel_type": predicate},
        headers=tenant.write,
    )
    assert response.status_code == expect, response.text
    return response.json()


async def relations(client, tenant, node: str) -> set[tuple[str, str, str]]:
    response = await client.get(f"/v1/nodes/{node}/relations", headers=tenant.read)
    assert response.status_code == 200, response.text
    return {(r["predicate"], r["direction"], r["node"]["id"]) for r in response.json()["relations"]}


async def test_acceptance_inline_relation_then_gazetteer_mention(client, tenant):
    stored = await client.post(
        "/v1/memories?wait=true",
        json={
            "content": "Anna Meier leitet die IT der Muster GmbH.",
            "relations": [
                {"predicate": "LEADS", "object": "Muster GmbH", "object_class": "Organization"}
            ],
        },
        headers=tenant.write,
    )
    assert stored.status_code == 201, stored.text
    first = stored.json()["id"]
    assert stored.json()["job"]["status"] == "done"
    found = await client.get("/v1/entities", params={"q": "Muster GmbH"}, headers=tenant.read)
    muster = found.json()["results"][0]
    assert (muster["name"], muster["entity_class"]) == ("Muster GmbH", "Organization")
    assert await relations(client, tenant, muster["id"]) >= {
        ("IS_LED_BY", "out", first),
        ("LEADS", "in", first),
        ("MENTIONS", "in", first),
    }

    later = await client.post(
        "/v1/memories?wait=true",
        json={"content": "Die Buchhaltung der Muster GmbH zieht im Mai nach Köln um."},
        headers=tenant.write,
    )
    assert later.json()["job"]["status"] == "done"
    assert later.json()["job"]["result"]["gazetteer"] >= 1
    assert ("MENTIONS", "in", later.json()["id"]) in await relations(client, tenant, muster["id"])
    assert ("MENTIONS", "out", muster["id"]) in await relations(client, tenant, later.json()["id"])


async def test_inline_relation_with_subject_links_the_memory_to_both(client, tenant):
    stored = await client.post(
        "/v1/memories?wait=true",
        json={
            "content": "Laut Organigramm arbeitet Jonas Berg bei der Firma Nordlicht.",
            "relations": [
                {
                    "predicate": "WORKS_FOR",
                    "subject": "Jonas Berg",
                    "object": "Nordlicht",
                    "object_class": "Organization",
                }
            ],
        },
        headers=tenant.write,
    )
    memory = stored.json()["id"]
    people = await client.get("/v1/entities", params={"q": "Jonas Berg"}, headers=tenant.read)
    jonas = people.json()["results"][0]
    assert jonas["entity_class"] == "Person"  # the only subject class WORKS_FOR allows
    rels = await relations(client, tenant, jonas["id"])
    assert ("MENTIONS", "in", memory) in rels
    assert any(p == "WORKS_FOR" and d == "out" for p, d, _ in rels)


async def test_unknown_predicate_or_class_in_inline_relations_writes_nothing(client, tenant, db):
    for relation, field in [
        ({"predicate": "HATES", "object": "X"}, "relations[0].predicate"),
        (
            {"predicate": "LEADS", "object": "X", "object_class": "Planet"},
            "relations[0].object_class",
        ),
        # two possible object classes (ActionRecord, Task) and no existing entity: class needed
        ({"predicate": "HAS_ASSIGNED_TASK", "object": "Umzug"}, "relations[0].object"),
    ]:
        response = await client.post(
            "/v1/memories",
            json={"content": f"Notiz {field} {relation}", "relations": [relation]},
            headers=tenant.write,
        )
        assert response.status_code == 422, response.text
        assert response.json()["field"] == field
    unknown = await client.post(
        "/v1/memories",
        json={"content": "x", "relations": [{"predicate": "HATES", "object": "X"}]},
        headers=tenant.write,
    )
    assert "WORKS_FOR" in unknown.json()["detail"]  # the allowed values are named
    for table in ("memories", "chunks", "entities", "edges", "mentions", "jobs"):
        assert await count_rows(db, table, tenant.id) == 0, table


async def test_class_checks_on_link(client, tenant):
    anna = await entity(client, tenant, "Anna Roth", "Person")
    acme = await entity(client, tenant, "Acme AG", "Organization")
    wrong = await link(client, tenant, acme, "WORKS_FOR", anna, expect=422)
    assert wrong["field"] == "from_id" and "Person" in wrong["detail"]
    unknown = await link(client, tenant, anna, "ADORES", acme, expect=422)
    assert unknown["field"] == "rel_type"
    missing = await client.post(
        "/v1/relations",
        json={"from_id": anna, "to_id": str(uuid.uuid4()), "rel_type": "KNOWS"},
        headers=tenant.write,
    )
    assert missing.status_code == 404
    bad_class = await client.post(
        "/v1/entities", json={"name": "Mars", "entity_class": "Planet"}, headers=tenant.write
    )
    assert bad_class.status_code == 422 and bad_class.json()["field"] == "entity_class"


async def test_inverse_symmetric_idempotent_link_and_unlink(client, tenant):
    anna = await entity(client, tenant, "Anna Roth", "Person")
    ben = await entity(client, tenant, "Ben Roth", "Person")
    acme = await entity(client, tenant, "Acme AG", "Organization")
    first = await link(client, tenant, anna, "WORKS_FOR", acme)
    again = await link(client, tenant, anna, "WORKS_FOR", acme)
    assert first == again  # same edges, not new ones
    assert ("HAS_EMPLOYEE", "out", anna) in await relations(client, tenant, acme)
    await link(client, tenant, anna, "SPOUSE_OF", ben)
    assert ("SPOUSE_OF", "out", anna) in await relations(client, tenant, ben)

    body = {"from_id": ben, "to_id": anna, "rel_type": "SPOUSE_OF"}  # unlink from the twin's side
    removed = await client.request("DELETE", "/v1/relations", json=body, headers=tenant.write)
    assert removed.json() == {"removed": 2}
    again = await client.request("DELETE", "/v1/relations", json=body, headers=tenant.write)
    assert again.json() == {"removed": 0}
    assert not {p for p, _, _ in await relations(client, tenant, ben)} & {"SPOUSE_OF"}


async def test_derived_edges_appear_and_disappear(client, tenant):
    app = await entity(client, tenant, "Webshop", "Application")
    box = await entity(client, tenant, "shop-container", "Container")
    host = await entity(client, tenant, "web-01", "Host")
    await link(client, tenant, app, "DEPLOYED_TO", box)
    assert not any(p == "RUNS_ON" for p, _, _ in await relations(client, tenant, app))
    await link(client, tenant, box, "HOSTED_ON", host)
    assert ("RUNS_ON", "out", host) in await relations(client, tenant, app)

    client_org = await entity(client, tenant, "Kunde Eins GmbH", "Organization")
    await link(client, tenant, client_org, "HAS_OPERATED_APPLICATION", app)
    assert ("HOST_SERVES_CLIENT", "out", client_org) in await relations(client, tenant, host)

    await link(client, tenant, app, "RUNS_ON", host, expect=422)  # derived: never by hand
    await client.request(
        "DELETE",
        "/v1/relations",
        json={"from_id": box, "to_id": host, "rel_type": "HOSTED_ON"},
        headers=tenant.write,
    )
    rels = {p for p, _, _ in await relations(client, tenant, app)}
    assert "RUNS_ON" not in rels and "DEPLOYED_TO" in rels
    assert "HOST_SERVES_CLIENT" not in {p for p, _, _ in await relations(client, tenant, host)}


async def test_works_for_client_is_derived(client, tenant):
    anna = await entity(client, tenant, "Anna Roth", "Person")
    agency = await entity(client, tenant, "Agentur Blau", "Organization")
    customer = await entity(client, tenant, "Bäckerei Korn", "Organization")
    await link(client, tenant, anna, "WORKS_FOR", agency)
    await link(client, tenant, customer, "CLIENT_OF", agency)
    assert ("WORKS_FOR_CLIENT", "out", customer) in await relations(client, tenant, anna)


async def test_entity_upsert_merges_aliases_and_search_is_fuzzy(client, tenant):
    first = await client.post(
        "/v1/entities",
        json={"name": "Müller GmbH", "entity_class": "Organization", "aliases": ["MüGe"]},
        headers=tenant.write,
    )
    second = await client.post(
        "/v1/entities",
        json={
            "name": "MÜLLER  GmbH",
            "entity_class": "Organization",
            "aliases": ["Mueller"],
            "description": "Kunde seit 2020",
        },
        headers=tenant.write,
    )
    assert first.status_code == 201 and second.status_code == 200
    assert first.json()["id"] == second.json()["id"]
    assert second.json()["aliases"] == ["Mueller", "MüGe"]
    as_person = await entity(client, tenant, "Müller GmbH", "Person")  # other class: other node
    assert as_person != first.json()["id"]
    for query in ("muller gmbh", "Mueller", "müge", "Muller"):
        hits = await client.get("/v1/entities", params={"q": query}, headers=tenant.read)
        assert first.json()["id"] in [h["id"] for h in hits.json()["results"]], query
    got = await client.get(f"/v1/entities/{first.json()['id']}", headers=tenant.read)
    assert got.json()["description"] == "Kunde seit 2020"


async def test_gazetteer_matches_across_inflection(client, tenant):
    await entity(client, tenant, "Anna Meier", "Person")
    await entity(client, tenant, "Muster GmbH", "Organization", aliases=["Muster"])
    stored = await client.post(
        "/v1/memories?wait=true",
        json={"content": "Anna Meiers Team hat den Vertrag mit der MUSTER GmbH verlängert."},
        headers=tenant.write,
    )
    rels = await relations(client, tenant, stored.json()["id"])
    names = await client.get(f"/v1/nodes/{stored.json()['id']}/relations", headers=tenant.read)
    found = {r["node"]["title_or_name"] for r in names.json()["relations"]}
    assert {"Anna Meier", "Muster GmbH"} <= found
    assert all(p == "MENTIONS" for p, _, _ in rels)


async def test_ner_creates_candidate_entities(client, tenant):
    stored = await client.post(
        "/v1/memories?wait=true",
        json={
            "content": "Herr Klaus Weber von der Beispiel Software AG betreut den Server "
            "db-02 und die Seite https://portal.beispiel.de/login."
        },
        headers=tenant.write,
    )
    result = stored.json()["job"]["result"]
    assert result["ner"] >= 4 and result["entities_created"] >= 4
    for query, cls in [
        ("Klaus Weber", "Person"),
        ("Beispiel Software AG", "Organization"),
        ("db-02", "Host"),
        ("portal.beispiel.de", "Domain"),
    ]:
        hits = (await client.get("/v1/entities", params={"q": query}, headers=tenant.read)).json()[
            "results"
        ]
        assert hits and hits[0]["entity_class"] == cls, (query, hits)
        detail = (await client.get(f"/v1/entities/{hits[0]['id']}", headers=tenant.read)).json()
        assert detail["origin"] == "ner" and detail["confidence"] < 1.0


async def test_english_tenant_uses_spacy(client):
    pytest.importorskip("spacy", reason="the ner extra (spaCy) is not installed")
    english = await make_tenant(client, language="english")
    stored = await client.post(
        "/v1/memories?wait=true",
        json={"content": "Sarah Connor met the board of Cyberdyne Systems in Los Angeles."},
        headers=english.write,
    )
    assert stored.json()["job"]["status"] == "done"
    hits = await client.get("/v1/entities", params={"q": "Sarah Connor"}, headers=english.read)
    assert hits.json()["results"][0]["entity_class"] == "Person"


async def test_schema_catalogue_and_extension(client, tenant, other_tenant):
    catalogue = (await client.get("/v1/schema", headers=tenant.read)).json()
    works_for = next(p for p in catalogue["predicates"] if p["name"] == "WORKS_FOR")
    assert works_for["inverse"] == "HAS_EMPLOYEE" and works_for["subject_classes"] == ["Person"]
    assert next(p for p in catalogue["predicates"] if p["name"] == "RUNS_ON")["derived"] is True
    created = await client.post(
        "/v1/schema/predicates",
        json={
            "name": "MAINTAINS",
            "subject_classes": ["Person"],
            "object_classes": ["Vehicle"],
            "inverse": "MAINTAINED_BY",
            "new_classes": ["Vehicle"],
        },
        headers=tenant.write,
    )
    assert created.status_code == 201, created.text
    clash = await client.post(
        "/v1/schema/predicates",
        json={"name": "WORKS_FOR", "subject_classes": ["Person"], "object_classes": ["Person"]},
        headers=tenant.write,
    )
    assert clash.status_code == 409
    mechanic = await entity(client, tenant, "Eva Stahl", "Person")
    truck = await entity(client, tenant, "LKW 7", "Vehicle")
    await link(client, tenant, mechanic, "MAINTAINS", truck)
    assert ("MAINTAINED_BY", "out", mechanic) in await relations(client, tenant, truck)
    theirs = (await client.get("/v1/schema", headers=other_tenant.read)).json()
    assert "MAINTAINS" not in {p["name"] for p in theirs["predicates"]}


async def test_deleting_a_memory_removes_its_edges(client, tenant, db):
    stored = await client.post(
        "/v1/memories",
        json={
            "content": "Projekt Nordwind startet im Herbst.",
            "relations": [{"predicate": "ABOUT", "object": "Nordwind", "object_class": "Topic"}],
        },
        headers=tenant.write,
    )
    assert await count_rows(db, "edges", tenant.id) == 2
    deleted = await client.delete(f"/v1/memories/{stored.json()['id']}", headers=tenant.write)
    assert deleted.status_code == 204, deleted.text
    assert await count_rows(db, "edges", tenant.id) == 0
    assert await count_rows(db, "mentions", tenant.id) == 0
    assert await count_rows(db, "entities", tenant.id) == 1  # the entity itself stays


async def test_deleting_a_memory_while_its_extraction_writes(client, tenant, db):
    """An extraction step holds its memory and writes a mention of a chunk while a deletion
    of that memory arrives: the deletion waits for the step and then removes what it wrote
    (neither a deadlock nor a mention that outlives its memory)."""
    stored = await client.post(
        "/v1/memories?wait=true",
        json={"content": "Projekt Nordwind startet im Herbst."},
        headers=tenant.write,
    )
    memory_id, tenant_id = uuid.UUID(stored.json()["id"]), uuid.UUID(tenant.id)
    topic = uuid.UUID(await entity(client, tenant, "Nordwind", "Topic"))
    async with db.owner.connect() as conn, conn.begin():  # the extraction step, part-way
        assert await memory_store.hold_memory(conn, tenant_id, memory_id)
        chunk_id = await conn.scalar(
            text("SELECT id FROM chunks WHERE tenant_id = :t AND memory_id = :m LIMIT 1"),
            {"t": tenant_id, "m": memory_id},
        )
        deletion = off_thread(client.delete(f"/v1/memories/{memory_id}", headers=tenant.write))
        await asyncio.sleep(0.5)  # the deletion is under way, waiting for what it needs
        mention = (memory_id, chunk_id, topic, "ner", 0.9, 8, 16)
        await edge_store.insert_mentions(conn, tenant_id, [mention])
        await set_sentence_vectors(conn, tenant_id, [(chunk_id, b"")])
    response = await deletion
    assert response.status_code == 204, response.text
    assert await count_rows(db, "mentions", tenant.id) == 0
    assert await count_rows(db, "chunk_sentences", tenant.id) == 0
    assert await count_rows(db, "memories", tenant.id) == 0


async def test_erasing_a_tenant_while_an_extraction_writes(client, db):
    """An extraction step holds its memory and creates an entity (whose foreign key needs the
    tenant row) while the whole tenant is erased: the erasure waits for the step and then
    removes everything (no deadlock)."""
    tenant = await make_tenant(client)
    stored = await client.post(
        "/v1/memories?wait=true",
        json={"content": "Projekt Nordwind startet im Herbst."},
        headers=tenant.write,
    )
    memory_id, tenant_id = uuid.UUID(stored.json()["id"]), uuid.UUID(tenant.id)
    async with db.owner.connect() as conn, conn.begin():  # the extraction step, part-way
        assert await memory_store.hold_memory(conn, tenant_id, memory_id)
        erasure = off_thread(client.delete(f"/v1/admin/tenants/{tenant.id}", headers=ADMIN_HEADERS))
        await asyncio.sleep(0.5)  # the erasure is under way, waiting for what it needs
        new = entity_store.NewEntity(name="Herbst", norm_name="herbst", entity_class="Topic")
        await entity_store.insert_entity_if_missing(conn, tenant_id, new)
    response = await erasure
    assert response.status_code == 200, response.text
    for table in ("memories", "chunks", "entities"):
        assert await count_rows(db, table, tenant.id) == 0, table


async def test_an_entity_linked_while_its_last_memory_is_erased_stays(client, tenant, db):
    """An erasure removes the entities only the erased memory mentioned, while an extraction
    step links one of them to another memory: the erasure waits for the step, sees the new
    mention, and keeps the entity and that mention (its cascade removed them before)."""
    erased = await client.post(
        "/v1/memories?wait=true",
        json={
            "content": "Ilse Quandtmann kann Buchhaltung.",
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
    kept = await client.post(
        "/v1/memories?wait=true",
        json={"content": "Die Kantine öffnet um zwölf."},
        headers=tenant.write,
    )
    tenant_id, kept_id = uuid.UUID(tenant.id), uuid.UUID(kept.json()["id"])
    async with db.owner_tx() as conn:
        skill = await conn.scalar(
            text("SELECT id FROM entities WHERE tenant_id = :t AND name = 'Buchhaltung'"),
            {"t": tenant_id},
        )
    async with db.owner.connect() as conn, conn.begin():  # the extraction step of `kept`
        assert await memory_store.hold_memory(conn, tenant_id, kept_id)
        mention = (kept_id, None, skill, "gazetteer", 0.9, None, None)
        assert await edge_store.insert_mentions(conn, tenant_id, [mention]) == 1
        erasure = off_thread(
            client.delete(f"/v1/memories/{erased.json()['id']}?erase=true", headers=tenant.write)
        )
        await asyncio.sleep(0.5)  # the erasure is under way, waiting for the entity
    receipt = await erasure
    assert receipt.status_code == 200, receipt.text
    async with db.owner_tx() as conn:
        left = await conn.scalar(
            text(
                "SELECT count(*) FROM mentions WHERE tenant_id = :t AND memory_id = :m "
                "AND entity_id = :e"
            ),
            {"t": tenant_id, "m": kept_id, "e": skill},
        )
        names = set(
            (
                await conn.execute(
                    text("SELECT name FROM entities WHERE tenant_id = :t"), {"t": tenant_id}
                )
            ).scalars()
        )
    assert left == 1
    assert "Buchhaltung" in names and "Ilse Quandtmann" not in names


async def test_graph_is_isolated_between_tenants(client, tenant, other_tenant, db):
    from sqlalchemy import text

    anna = await entity(client, tenant, "Anna Roth", "Person")
    acme = await entity(client, tenant, "Acme AG", "Organization")
    await link(client, tenant, anna, "WORKS_FOR", acme)
    mine = await entity(client, other_tenant, "Ben Roth", "Person")
    assert (await client.get(f"/v1/entities/{anna}", headers=other_tenant.read)).status_code == 404
    assert (
        await client.get(f"/v1/nodes/{anna}/relations", headers=other_tenant.read)
    ).status_code == 404
    cross = await client.post(
        "/v1/relations",
        json={"from_id": mine, "to_id": anna, "rel_type": "KNOWS"},
        headers=other_tenant.write,
    )
    assert cross.status_code == 404
    hits = await client.get("/v1/entities", params={"q": "Anna Roth"}, headers=other_tenant.read)
    assert anna not in [h["id"] for h in hits.json()["results"]]
    assert [h["id"] for h in hits.json()["results"]] == [mine]  # only its own "… Roth"
    async with db.tenant_tx(uuid.UUID(other_tenant.id)) as conn:
        for table in ("entities", "entity_names", "edges", "mentions", "jobs"):
            rows = await conn.scalar(
                text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"), {"t": tenant.id}
            )
            assert rows == 0, table
