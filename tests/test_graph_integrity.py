"""Graph data integrity: inline relations are checked on every write (unchanged content
included), a name resolves to the existing entity instead of a twin of another class,
no node relates to itself, and the default catalogue's company relations and labels."""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import TenantAccess, count_rows
from tests.test_graph import entity, link, relations

MCP = "/api/mcp/v1"


async def remember(client, tenant: TenantAccess, content: str, *rels: dict[str, Any]):
    return await client.post(
        "/v1/memories", json={"content": content, "relations": list(rels)}, headers=tenant.write
    )


async def named(client, tenant: TenantAccess, name: str) -> list[dict[str, Any]]:
    found = await client.get("/v1/entities", params={"q": name}, headers=tenant.read)
    assert found.status_code == 200, found.text
    return [e for e in found.json()["results"] if e["name"] == name]


async def mcp_call(client, headers: dict[str, str], name: str, arguments: dict[str, Any]):
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = await client.post(MCP, json=body, headers=headers)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    return result["isError"], json.loads(result["content"][0]["text"])


def assert_422(response, field: str, *words: str) -> None:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["field"] == field, body
    for word in words:
        assert word in body["detail"], body


# -- relations on unchanged content ------------------------------------------------------------

CONTENT = "Anna Meier arbeitet seit 2019 bei der Muster GmbH."
VALID = {"predicate": "WORKS_FOR", "object": "Muster GmbH", "object_class": "Organization"}


async def test_invalid_relation_on_unchanged_content_is_refused(client, tenant):
    first = await remember(client, tenant, CONTENT, VALID)
    assert first.status_code == 201, first.text
    memory = first.json()["id"]
    before = await relations(client, tenant, memory)
    again = await remember(client, tenant, CONTENT, VALID)
    assert again.status_code == 200 and again.json()["status"] == "unchanged"

    bad_predicate = await remember(client, tenant, CONTENT, VALID | {"predicate": "HATES"})
    assert_422(bad_predicate, "relations[0].predicate", "WORKS_FOR")
    unknown_class = await remember(client, tenant, CONTENT, VALID | {"object_class": "Planet"})
    assert_422(unknown_class, "relations[0].object_class", "Planet")
    assert await relations(client, tenant, memory) == before
    assert len(await named(client, tenant, "Muster GmbH")) == 1


async def test_batch_and_documents_check_relations_of_unchanged_content(client, tenant):
    stored = await client.post(
        "/v1/memories/batch", json={"items": [{"content": CONTENT}]}, headers=tenant.write
    )
    assert stored.json()["results"][0]["status"] == "created", stored.text
    items = [{"content": CONTENT, "relations": [VALID | {"predicate": "HATES"}]}]
    again = await client.post("/v1/memories/batch", json={"items": items}, headers=tenant.write)
    [result] = again.json()["results"]
    assert result["status"] == "error", result
    assert result["error"]["field"] == "relations[0].predicate"

    doc = {"title": "Organigramm", "content": CONTENT, "relations": [VALID]}
    created = await client.post("/v1/documents", json=doc, headers=tenant.write)
    assert created.status_code == 201, created.text
    bad = doc | {"relations": [VALID | {"object_class": "Planet"}]}
    refused = await client.post("/v1/documents", json=bad, headers=tenant.write)
    assert_422(refused, "relations[0].object_class")


# -- names resolve to the existing entity; no twins of another class ---------------------------


async def test_leads_resolves_to_the_existing_project(client, tenant):
    atlas = await entity(client, tenant, "Projekt Atlas", "Project")
    stored = await remember(
        client,
        tenant,
        "Anna Meier leitet das Projekt Atlas.",
        {"predicate": "LEADS", "subject": "Anna Meier", "object": "Projekt Atlas"},
    )
    assert stored.status_code == 201, stored.text
    assert [e["id"] for e in await named(client, tenant, "Projekt Atlas")] == [atlas]
    [anna] = await named(client, tenant, "Anna Meier")
    assert anna["entity_class"] == "Person"
    assert {("LEADS", "out", atlas)} <= await relations(client, tenant, anna["id"])
    assert {("IS_LED_BY", "out", anna["id"])} <= await relations(client, tenant, atlas)


async def test_an_existing_entity_of_a_class_the_predicate_refuses_is_a_422(client, tenant, db):
    await entity(client, tenant, "Projekt Atlas", "Project")
    works_for = {"predicate": "WORKS_FOR", "subject": "Anna Meier", "object": "Projekt Atlas"}
    refused = await remember(client, tenant, "Anna Meier arbeitet für Atlas.", works_for)
    assert_422(refused, "relations[0].object", "Organization", "Project")
    explicit = await remember(
        client, tenant, "Anna Meier arbeitet für X.", works_for | {"object_class": "Project"}
    )
    assert_422(explicit, "relations[0].object_class", "Organization")
    as_subject = works_for | {"subject": "Projekt Atlas", "object": "Muster GmbH"}
    refused = await remember(client, tenant, "Atlas arbeitet für Muster.", as_subject)
    assert_422(refused, "relations[0].subject", "Person", "Project")
    assert await count_rows(db, "entities", tenant.id) == 1  # the project only: no twin
    assert await count_rows(db, "memories", tenant.id) == 0

    is_error, payload = await mcp_call(
        client,
        tenant.write,
        "knowmind_store_memory",
        {"content": "Anna Meier arbeitet für Atlas.", "relations": [works_for]},
    )
    assert is_error and payload["field"] == "relations[0].object", payload
    assert "Organization" in payload["error"]
    assert await count_rows(db, "entities", tenant.id) == 1
    assert await count_rows(db, "memories", tenant.id) == 0


async def test_mcp_store_checks_relations_of_unchanged_content(client, tenant):
    first = await mcp_call(client, tenant.write, "knowmind_store_memory", {"content": CONTENT})
    assert not first[0], first
    is_error, payload = await mcp_call(
        client,
        tenant.write,
        "knowmind_store_memory",
        {"content": CONTENT, "relations": [VALID | {"predicate": "HATES"}]},
    )
    assert is_error and payload["field"] == "relations[0].predicate", payload


# -- no self-relations -------------------------------------------------------------------------


async def test_a_node_cannot_relate_to_itself(client, tenant, db):
    anna = await entity(client, tenant, "Anna Meier", "Person")
    refused = await client.post(
        "/v1/relations",
        json={"from_id": anna, "to_id": anna, "rel_type": "KNOWS"},
        headers=tenant.write,
    )
    assert_422(refused, "to_id", "itself")
    knows = {"predicate": "KNOWS", "subject": "Anna Meier", "object": "Anna Meier"}
    inline = await remember(client, tenant, "Anna Meier kennt sich selbst.", knows)
    assert_422(inline, "relations[0].object", "itself")
    new_twice = knows | {"subject": "Ben Roth", "object": "Ben Roth"}
    assert_422(await remember(client, tenant, "Ben kennt Ben.", new_twice), "relations[0].object")
    assert await count_rows(db, "edges", tenant.id) == 0
    assert await count_rows(db, "entities", tenant.id) == 1


# -- the company relations of the default catalogue, with labels -------------------------------


async def test_company_relations_and_their_inverses(client, tenant):
    anna = await entity(client, tenant, "Anna Meier", "Person")
    ben = await entity(client, tenant, "Ben Roth", "Person")
    team = await entity(client, tenant, "Team Daten", "Organization")
    atlas = await entity(client, tenant, "Projekt Atlas", "Project")
    for subject, predicate, object_, inverse in [
        (anna, "LEADS", atlas, "IS_LED_BY"),
        (anna, "LEADS", team, "IS_LED_BY"),
        (ben, "MEMBER_OF", team, "HAS_MEMBER"),
        (ben, "REPORTS_TO", anna, "HAS_DIRECT_REPORT"),
        (ben, "WORKS_ON", atlas, "WORKED_ON_BY"),
    ]:
        await link(client, tenant, subject, predicate, object_)
        assert (predicate, "out", object_) in await relations(client, tenant, subject)
        assert (inverse, "out", subject) in await relations(client, tenant, object_)
    # set through the inverse name: the forward edge appears
    await link(client, tenant, team, "HAS_MEMBER", anna)
    assert ("MEMBER_OF", "out", team) in await relations(client, tenant, anna)
    await link(client, tenant, atlas, "LEADS", anna, expect=422)  # Project cannot lead


async def test_every_predicate_has_german_and_english_labels(client, tenant):
    rest = await client.get("/v1/schema", headers=tenant.read)
    assert rest.status_code == 200, rest.text
    is_error, mcp = await mcp_call(client, tenant.read, "knowmind_get_schema", {})
    assert not is_error, mcp
    for catalogue in (rest.json(), mcp):
        predicates = {p["name"]: p for p in catalogue["predicates"]}
        for name, predicate in predicates.items():
            labels = predicate["labels"]
            assert labels["de"].strip() and labels["en"].strip(), name
        assert predicates["LEADS"]["labels"] == {"de": "leitet", "en": "leads"}
        assert predicates["IS_LED_BY"]["labels"] == {"de": "wird geleitet von", "en": "is led by"}
        assert predicates["WORKS_ON"]["labels"]["en"] == "works on"
        assert predicates["FOR_CLIENT"]["labels"]["en"] == "is a project for"
        assert set(predicates["LEADS"]["object_classes"]) == {"Organization", "Project"}
        for name in ("MEMBER_OF", "HAS_MEMBER", "REPORTS_TO", "HAS_DIRECT_REPORT"):
            assert name in predicates

    custom = await client.post(
        "/v1/schema/predicates",
        json={
            "name": "MENTORS",
            "subject_classes": ["Person"],
            "object_classes": ["Person"],
            "inverse": "MENTORED_BY",
        },
        headers=tenant.write,
    )
    assert custom.status_code == 201, custom.text
    after = (await client.get("/v1/schema", headers=tenant.read)).json()["predicates"]
    by_name = {p["name"]: p for p in after}
    assert by_name["MENTORS"]["labels"] == {"de": "mentors", "en": "mentors"}
    assert by_name["MENTORED_BY"]["labels"]["en"] == "mentored by"
