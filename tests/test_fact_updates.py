"""Facts that update themselves (issue 43, item 5): a single-valued predicate (lives in, works
for, has role, reports to, hosted on) holds one current object per subject. A new object closes
the old edge and its twin (``valid_to``: the old fact is still found ``as_of`` before the
change), marks the memory that stated it superseded by the new one, closes that memory when it
states no current fact any more, and leaves an audit entry; ``GET /v1/memories/{id}/history``
shows it. The same object again, or a predicate that may hold many objects, closes nothing.
Relations given with a memory (REST, MCP), linked by hand, and proposed by the LLM extractor
all go through the same rule."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from sqlalchemy import text

from knowmind.models.llm import Completion, Message
from knowmind.services.auth import Principal
from knowmind.services.graph import GraphService
from knowmind.services.llm_graph import LLMGraphExtraction
from tests.conftest import ADMIN_HEADERS, TenantAccess
from tests.test_mcp import ok


def lives_in(person: str, place: str) -> dict[str, str]:
    return {
        "subject": person,
        "subject_class": "Person",
        "predicate": "LIVES_IN",
        "object": place,
        "object_class": "Location",
    }


async def remember(client, tenant: TenantAccess, content: str, *relations: dict) -> str:
    stored = await client.post(
        "/v1/memories",
        json={"content": content, "relations": list(relations)},
        headers=tenant.write,
    )
    assert stored.status_code == 201, stored.text
    return str(stored.json()["id"])


async def entity_id(client, tenant: TenantAccess, name: str) -> str:
    found = await client.get("/v1/entities", params={"q": name}, headers=tenant.read)
    hits = [h for h in found.json()["results"] if h["name"] == name]
    assert len(hits) == 1, found.text
    return str(hits[0]["id"])


async def relations(client, tenant: TenantAccess, node: str, closed: bool = False) -> list[dict]:
    params = {"closed": "true"} if closed else {}
    response = await client.get(f"/v1/nodes/{node}/relations", params=params, headers=tenant.read)
    assert response.status_code == 200, response.text
    return [r for r in response.json()["relations"] if r["predicate"] != "MENTIONS"]


def objects(rels: list[dict], predicate: str) -> list[tuple[str | None, bool]]:
    """(name, still holds) of the node's outgoing ``predicate`` edges."""
    return sorted(
        (r["node"]["title_or_name"], r["valid_to"] is None)
        for r in rels
        if r["predicate"] == predicate and r["direction"] == "out"
    )


async def recall(client, tenant: TenantAccess, query: str, **extra: Any) -> list[str]:
    body = {"query": query, "k": 3} | extra
    response = await client.post("/v1/recall", json=body, headers=tenant.read)
    assert response.status_code == 200, response.text
    return [r["memory_id"] for r in response.json()["results"]]


async def memory(client, tenant: TenantAccess, memory_id: str) -> dict:
    response = await client.get(f"/v1/memories/{memory_id}", headers=tenant.read)
    assert response.status_code == 200, response.text
    return dict(response.json())


async def history(client, tenant: TenantAccess, memory_id: str) -> list[dict]:
    response = await client.get(f"/v1/memories/{memory_id}/history", headers=tenant.read)
    assert response.status_code == 200, response.text
    assert response.json()["memory_id"] == memory_id
    return list(response.json()["events"])


async def fact_audit(client, tenant: TenantAccess) -> list[dict]:
    response = await client.get(
        "/v1/admin/audit", params={"tenant_id": tenant.id}, headers=ADMIN_HEADERS
    )
    assert response.status_code == 200, response.text
    return [e for e in reversed(response.json()) if e["action"] == "fact.superseded"]


async def test_a_new_residence_replaces_the_old_one(client, tenant):
    other = await remember(
        client, tenant, "Tom Becker wohnt in München.", lives_in("Tom Becker", "München")
    )
    berlin = await remember(
        client, tenant, "Lisa Wagner wohnt in Berlin.", lives_in("Lisa Wagner", "Berlin")
    )
    await asyncio.sleep(0.05)
    before = datetime.now(UTC)
    await asyncio.sleep(0.05)
    hamburg = await remember(
        client, tenant, "Lisa Wagner lives in Hamburg now.", lives_in("Lisa Wagner", "Hamburg")
    )

    for question in ("Where does Lisa live?", "Wo wohnt Lisa?"):
        now = await recall(client, tenant, question)
        assert now[0] == hamburg, question
        assert berlin not in now, question  # no longer current
        then = await recall(client, tenant, question, as_of=before.isoformat())
        assert then[0] == berlin, question
        assert hamburg not in then, question
    assert other in await recall(client, tenant, "Wo wohnt Tom Becker?")

    # the old edge and its twin are closed where the new fact begins, not deleted
    lisa = await entity_id(client, tenant, "Lisa Wagner")
    assert objects(await relations(client, tenant, lisa), "LIVES_IN") == [("Hamburg", True)]
    closed = await relations(client, tenant, lisa, closed=True)
    assert objects(closed, "LIVES_IN") == [("Berlin", False), ("Hamburg", True)]
    old_edge = next(r for r in closed if r["node"]["title_or_name"] == "Berlin")
    new_edge = next(r for r in closed if r["node"]["title_or_name"] == "Hamburg")
    assert old_edge["valid_to"] == new_edge["valid_from"]
    berlin_place = await entity_id(client, tenant, "Berlin")
    twin = await relations(client, tenant, berlin_place, closed=True)
    assert objects(twin, "HAS_RESIDENT") == [("Lisa Wagner", False)]
    assert objects(await relations(client, tenant, berlin_place), "HAS_RESIDENT") == []

    # the memory that stated it: superseded by the new one, and no longer valid
    old = await memory(client, tenant, berlin)
    assert old["valid_to"] is not None
    assert datetime.fromisoformat(old["valid_to"]) > before
    assert (await memory(client, tenant, hamburg))["valid_to"] is None
    assert (await memory(client, tenant, other))["valid_to"] is None
    supersedes = [
        r for r in await relations(client, tenant, hamburg) if r["predicate"] == "SUPERSEDES"
    ]
    assert [r["node"]["id"] for r in supersedes] == [berlin]

    # the audit log: ids, the predicate, who; no names (it is never erased)
    [entry] = await fact_audit(client, tenant)
    detail = entry["detail"]
    assert detail["predicate"] == "LIVES_IN" and detail["decided_by"] == "rule"
    assert (detail["old_memory_id"], detail["new_memory_id"]) == (berlin, hamburg)
    assert (detail["old_edge_id"], detail["new_edge_id"]) == (
        old_edge["edge_id"],
        new_edge["edge_id"],
    )
    assert detail["old_object_id"] == berlin_place
    assert detail["subject_id"] == lisa
    assert detail["old_memory_closed"] is True
    assert entry["actor"].startswith("token:")
    assert {berlin, hamburg, old_edge["edge_id"]} <= set(entry["targets"])
    assert "Berlin" not in json.dumps(entry) and "Hamburg" not in json.dumps(entry)

    # the history, on both memories
    [event] = await history(client, tenant, berlin)
    assert event["event"] == "superseded_by" and event["memory_id"] == hamburg
    assert event["automatic"] is True and event["memory_closed"] is True
    assert event["reason"] == "automatic: LIVES_IN changed from Berlin to Hamburg"
    assert event["actor"] == entry["actor"]
    fact = event["fact"]
    assert (fact["predicate"], fact["subject"]["name"]) == ("LIVES_IN", "Lisa Wagner")
    assert (fact["old_object"]["name"], fact["new_object"]["name"]) == ("Berlin", "Hamburg")
    assert fact["audit_id"] == entry["id"] and fact["decided_by"] == "rule"
    [event] = await history(client, tenant, hamburg)
    assert (event["event"], event["memory_id"], event["memory_closed"]) == (
        "supersedes",
        berlin,
        False,
    )
    assert await history(client, tenant, other) == []
    missing = "00000000-0000-4000-8000-000000000000"
    gone = await client.get(f"/v1/memories/{missing}/history", headers=tenant.read)
    assert gone.status_code == 404

    # the catalogue says which predicates are single-valued
    catalogue = (await client.get("/v1/schema", headers=tenant.read)).json()
    flags = {p["name"]: p["single_valued"] for p in catalogue["predicates"]}
    assert flags["LIVES_IN"] and flags["WORKS_FOR"] and flags["HAS_ROLE"]
    assert flags["REPORTS_TO"] and flags["HOSTED_ON"]
    assert not flags["LEADS"] and not flags["WORKS_ON"] and not flags["HAS_RESIDENT"]


async def test_the_same_fact_again_or_a_many_valued_predicate_closes_nothing(client, tenant):
    first = await remember(
        client, tenant, "Lisa Wagner wohnt in Berlin.", lives_in("Lisa Wagner", "Berlin")
    )
    again = await remember(
        client,
        tenant,
        "Lisa Wagner wohnt noch immer in Berlin.",
        lives_in("Lisa Wagner", "Berlin"),
    )
    atlas = await remember(
        client,
        tenant,
        "Lisa Wagner arbeitet am Projekt Atlas und leitet es.",
        {"subject": "Lisa Wagner", "predicate": "WORKS_ON", "object": "Atlas",
         "object_class": "Project"},
        {"subject": "Lisa Wagner", "predicate": "LEADS", "object": "Atlas",
         "object_class": "Project"},
        {"subject": "Lisa Wagner", "predicate": "KNOWS", "object": "Tom Becker"},
    )  # fmt: skip
    boreas = await remember(
        client,
        tenant,
        "Lisa Wagner arbeitet auch am Projekt Boreas und leitet es.",
        {"subject": "Lisa Wagner", "predicate": "WORKS_ON", "object": "Boreas",
         "object_class": "Project"},
        {"subject": "Lisa Wagner", "predicate": "LEADS", "object": "Boreas",
         "object_class": "Project"},
        {"subject": "Lisa Wagner", "predicate": "KNOWS", "object": "Eva Roth"},
    )  # fmt: skip
    lisa = await entity_id(client, tenant, "Lisa Wagner")
    rels = await relations(client, tenant, lisa, closed=True)
    assert objects(rels, "LIVES_IN") == [("Berlin", True)]
    assert objects(rels, "WORKS_ON") == [("Atlas", True), ("Boreas", True)]
    assert objects(rels, "LEADS") == [("Atlas", True), ("Boreas", True)]
    assert objects(rels, "KNOWS") == [("Eva Roth", True), ("Tom Becker", True)]
    for memory_id in (first, again, atlas, boreas):
        assert (await memory(client, tenant, memory_id))["valid_to"] is None
        assert await history(client, tenant, memory_id) == []
    assert await fact_audit(client, tenant) == []


async def test_a_memory_that_still_states_a_current_fact_stays_valid_but_is_marked(client, tenant):
    works_for = {"subject": "Tom Becker", "predicate": "WORKS_FOR"}
    both = await remember(
        client,
        tenant,
        "Tom Becker wohnt in Köln und arbeitet für die Rheinwerk GmbH.",
        lives_in("Tom Becker", "Köln"),
        works_for | {"object": "Rheinwerk GmbH", "object_class": "Organization"},
    )
    moved = await remember(
        client, tenant, "Tom Becker ist nach Bonn gezogen.", lives_in("Tom Becker", "Bonn")
    )
    assert (await memory(client, tenant, both))["valid_to"] is None  # still says Rheinwerk
    [event] = await history(client, tenant, both)
    assert (event["event"], event["memory_id"], event["memory_closed"]) == (
        "superseded_by",
        moved,
        False,
    )
    assert event["reason"] == "automatic: LIVES_IN changed from Köln to Bonn"
    assert both in await recall(client, tenant, "Für wen arbeitet Tom Becker?")

    changed = await remember(
        client,
        tenant,
        "Tom Becker arbeitet jetzt für die Moselwerk AG.",
        works_for | {"object": "Moselwerk AG", "object_class": "Organization"},
    )
    # its last current fact replaced: now the old memory ends
    assert (await memory(client, tenant, both))["valid_to"] is not None
    events = await history(client, tenant, both)
    assert [(e["event"], e["memory_id"], e["memory_closed"]) for e in events] == [
        ("superseded_by", moved, False),
        ("superseded_by", changed, True),
    ]
    assert events[1]["fact"]["predicate"] == "WORKS_FOR"
    assert (await memory(client, tenant, moved))["valid_to"] is None
    audit = await fact_audit(client, tenant)
    assert [e["detail"]["old_memory_closed"] for e in audit] == [False, True]


async def test_links_by_hand_follow_the_rule_in_either_direction(client, tenant):
    async def entity(name: str, cls: str) -> str:
        made = await client.post(
            "/v1/entities", json={"name": name, "entity_class": cls}, headers=tenant.write
        )
        return str(made.json()["id"])

    async def link(a: str, predicate: str, b: str) -> None:
        body = {"from_id": a, "to_id": b, "rel_type": predicate}
        linked = await client.post("/v1/relations", json=body, headers=tenant.write)
        assert linked.status_code == 200, linked.text

    anna = await entity("Anna Roth", "Person")
    acme = await entity("Acme AG", "Organization")
    globex = await entity("Globex AG", "Organization")
    await link(anna, "WORKS_FOR", acme)
    await link(anna, "WORKS_FOR", acme)  # the same again: nothing closes
    assert objects(await relations(client, tenant, anna, closed=True), "WORKS_FOR") == [
        ("Acme AG", True)
    ]
    await link(globex, "HAS_EMPLOYEE", anna)  # the inverse says anna works for Globex now
    assert objects(await relations(client, tenant, anna, closed=True), "WORKS_FOR") == [
        ("Acme AG", False),
        ("Globex AG", True),
    ]
    await link(anna, "WORKS_FOR", acme)  # back again: a new edge beside the closed one
    assert objects(await relations(client, tenant, anna, closed=True), "WORKS_FOR") == [
        ("Acme AG", False),
        ("Acme AG", True),
        ("Globex AG", False),
    ]
    audit = await fact_audit(client, tenant)
    assert [e["detail"]["new_object_id"] for e in audit] == [globex, acme]
    assert all(e["detail"]["old_memory_id"] is None for e in audit)  # no memory stated them

    # a derived edge follows the current one: the application runs on the new host only
    app = await entity("Webshop", "Application")
    box = await entity("shop-container", "Container")
    await link(app, "DEPLOYED_TO", box)
    await link(box, "HOSTED_ON", await entity("web-01", "Host"))
    await link(box, "HOSTED_ON", await entity("web-02", "Host"))
    assert objects(await relations(client, tenant, app), "RUNS_ON") == [("web-02", True)]

    # a tenant's own predicate may be single-valued
    extended = await client.post(
        "/v1/schema/predicates",
        json={
            "name": "DRIVES",
            "subject_classes": ["Person"],
            "object_classes": ["Vehicle"],
            "new_classes": ["Vehicle"],
            "single_valued": True,
        },
        headers=tenant.write,
    )
    assert extended.status_code == 201, extended.text
    assert extended.json()["single_valued"] is True
    await link(anna, "DRIVES", await entity("Golf", "Vehicle"))
    await link(anna, "DRIVES", await entity("Polo", "Vehicle"))
    assert objects(await relations(client, tenant, anna), "DRIVES") == [("Polo", True)]


async def test_through_the_mcp_store_tool(client, tenant):
    def store(content: str, place: str) -> dict[str, Any]:
        return {"content": content, "relations": [lives_in("Eva Roth", place)]}

    old = await ok(
        client, tenant.write, "knowmind_store_memory", store("Eva Roth wohnt in Ulm.", "Ulm")
    )
    new = await ok(
        client, tenant.write, "knowmind_store_memory", store("Eva Roth lebt jetzt in Kiel.", "Kiel")
    )
    found = await ok(client, tenant.read, "knowmind_recall_memories", {"query": "Wo wohnt Eva?"})
    assert found["results"][0]["memory_id"] == new["id"]
    assert old["id"] not in [r["memory_id"] for r in found["results"]]
    [event] = await history(client, tenant, old["id"])
    assert (event["event"], event["memory_id"]) == ("superseded_by", new["id"])
    assert event["reason"] == "automatic: LIVES_IN changed from Ulm to Kiel"


class ExtractorDouble:
    """Test double for the tenant's language model: answers each chunk with the place that
    chunk says Lisa Wagner lives in, as the LLM extractor asks (JSON)."""

    provider, model = "double", "tiny"

    async def complete(self, messages: Sequence[Message], *, max_tokens: int = 256, **_: object):
        prompt = messages[-1]["content"]
        place = next(p for p in ("Berlin", "Hamburg") if f"in {p}" in prompt)
        answer = {
            "entities": [
                {"name": "Lisa Wagner", "class": "Person"},
                {"name": place, "class": "Location"},
            ],
            "relations": [{"subject": "Lisa Wagner", "predicate": "lives in", "object": place}],
        }
        return Completion(json.dumps(answer), 10, 10, "stop")


async def test_the_llm_extractor_proposes_updates_through_the_same_rule(client, tenant, db):
    """Plain text, no relations given: the extractor's proposals replace the fact, the model's
    decision is in the audit entry. Extracted out of order (the newer memory first), the newer
    statement still wins: the older one's fact is closed where the newer one began."""
    tenant_id = UUID(tenant.id)
    berlin = await remember(client, tenant, "Lisa Wagner wohnt in Berlin.")
    hamburg = await remember(client, tenant, "Lisa Wagner lives in Hamburg now.")
    double = ExtractorDouble()

    async def model_for(who: Principal):
        return double, None

    step = LLMGraphExtraction(db, GraphService(db), model_for, server_prompt=None)
    assert (await step(tenant_id, UUID(hamburg)))["llm_relations"] == 1
    assert (await step(tenant_id, UUID(berlin)))["llm_relations"] == 1

    lisa = await entity_id(client, tenant, "Lisa Wagner")
    rels = await relations(client, tenant, lisa, closed=True)
    assert objects(rels, "LIVES_IN") == [("Berlin", False), ("Hamburg", True)]
    assert (await memory(client, tenant, berlin))["valid_to"] is not None
    assert (await memory(client, tenant, hamburg))["valid_to"] is None
    found = await recall(client, tenant, "Wo wohnt Lisa?")
    assert found[0] == hamburg and berlin not in found

    [entry] = await fact_audit(client, tenant)
    assert entry["actor"] == "extractor:llm"
    detail = entry["detail"]
    assert (detail["decided_by"], detail["model"]) == ("llm", "double/tiny")
    assert detail["proposal"]["predicate"] == "LIVES_IN"
    assert detail["proposal"]["confidence"] == 0.6
    assert (detail["old_memory_id"], detail["new_memory_id"]) == (berlin, hamburg)
    [event] = await history(client, tenant, berlin)
    assert (event["event"], event["memory_id"], event["memory_closed"]) == (
        "superseded_by",
        hamburg,
        True,
    )
    assert event["fact"]["decided_by"] == "llm" and event["fact"]["model"] == "double/tiny"
    async with db.tenant_tx(tenant_id) as conn:
        starts = dict(
            (
                await conn.execute(
                    text("SELECT id::text, valid_from FROM memories WHERE id::text = ANY(:ids)"),
                    {"ids": [berlin, hamburg]},
                )
            ).all()
        )
        closed_at = await conn.scalar(
            text("SELECT valid_to FROM edges WHERE predicate = 'LIVES_IN' AND valid_to IS NOT NULL")
        )
    assert closed_at == starts[hamburg]  # when the newer statement was made, not extracted


async def test_a_closed_edge_leaves_the_graph_mirror(client, tenant, db):
    """The mirror holds the current graph: closing an edge queues its deletion there."""
    tenant_id = UUID(tenant.id)
    graph = GraphService(db)  # the suite's own pools: the outbox triggers are on
    who = Principal(tenant_id, frozenset({"write"}))
    lisa, _ = await graph.upsert_entity(who, "Lisa Wagner", "Person")
    berlin, _ = await graph.upsert_entity(who, "Berlin", "Location")
    hamburg, _ = await graph.upsert_entity(who, "Hamburg", "Location")
    old, old_twin = await graph.link(who, lisa.id, berlin.id, "LIVES_IN")
    await graph.link(who, lisa.id, hamburg.id, "LIVES_IN")
    async with db.owner_tx() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT op, payload->>'id' FROM graph_outbox WHERE tenant_id = :t "
                    "AND payload->>'predicate' IN ('LIVES_IN', 'HAS_RESIDENT') ORDER BY id"
                ),
                {"t": tenant_id},
            )
        ).all()
    assert {edge for op, edge in rows if op == "delete_edge"} == {str(old), str(old_twin)}
