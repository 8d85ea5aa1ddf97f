"""Scopes inside a tenant (issue 43, item 6): tokens bound to one end user, adversarially.

A user-bound token writes its user's memories whatever a body says, and reads that user's and
the tenant's shared ones only, through every door (REST, MCP, the answer endpoint, jobs, the
graph's node listing) and every recall stage; it cannot change or erase what it does not own,
nor what the whole tenant shares. The rule lives in PostgreSQL (row-level security on
memories and chunks), checked here as the app role too. Per-user erasure with its receipt."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from knowmind.db.tenant_scope import UserScope, set_user_sql, user_of
from tests.conftest import ADMIN_HEADERS, TenantAccess, make_tenant
from tests.test_mcp import call, ok

# Bob's memory: the question words (first sentence) and a phrase found nowhere else (second):
# neither may ever reach Alice, whatever she asks and however.
BOB_SECRET = "Das Passwort des Tresors im Lager Kassel lautet Zebrafink."
BOB_ONLY = "Kobaltblaue Heringsmöwe"
ALICE_NOTE = "Das Lager Kassel bekommt nächste Woche einen neuen Tresor für Alice."
SHARED_NOTE = "Das Lager Kassel öffnet werktags um sieben Uhr."
QUESTIONS = [
    "Wie lautet das Passwort des Tresors im Lager Kassel?",
    "Zebrafink",
    "What is the password of the safe in Kassel?",
    "Wer kennt den Tresor in Kassel?",
    "Was weiß Bob über das Lager?",
]


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _token(client, tenant_id: str, scopes: list[str], user_id: str | None) -> dict:
    body: dict[str, Any] = {"scopes": scopes} | ({"user_id": user_id} if user_id else {})
    issued = await client.post(
        f"/v1/admin/tenants/{tenant_id}/tokens", json=body, headers=ADMIN_HEADERS
    )
    assert issued.status_code == 201, issued.text
    return issued.json()


@dataclass
class Scoped:
    tenant: TenantAccess
    alice: dict[str, str]  # write (and so read) token bound to alice
    alice_admin: dict[str, str]
    bob: dict[str, str]
    shared_id: str
    alice_id: str
    bob_id: str
    bob_job: str


@pytest.fixture
async def scoped(client) -> Scoped:
    tenant = await make_tenant(client)
    alice = _bearer((await _token(client, tenant.id, ["write"], "alice"))["token"])
    alice_admin = _bearer((await _token(client, tenant.id, ["admin"], "alice"))["token"])
    bob = _bearer((await _token(client, tenant.id, ["write"], "bob"))["token"])

    async def remember(headers: dict[str, str], body: dict[str, Any]) -> dict:
        done = await client.post("/v1/memories?wait=true", json=body, headers=headers)
        assert done.status_code == 201, done.text
        return done.json()

    shared = await remember(tenant.write, {"content": SHARED_NOTE, "title": "Öffnungszeiten"})
    mine = await remember(alice, {"content": ALICE_NOTE, "title": "Tresor"})
    relation = {"predicate": "WORKS_FOR", "object": "Tresorbau Zebrafink GmbH", "subject": "Bob"}
    bobs = await remember(
        bob,
        {
            "content": f"{BOB_SECRET} {BOB_ONLY}.",
            "title": "Tresor Passwort",
            "user_id": "alice",  # ignored: the token's user wins
            "relations": [relation],
        },
    )
    return Scoped(
        tenant, alice, alice_admin, bob, shared["id"], mine["id"], bobs["id"], bobs["job"]["id"]
    )


def _leaks(payload: Any, s: Scoped) -> list[str]:
    """What of Bob's memory shows in an answer to Alice: its id, its own phrase."""
    dumped = json.dumps(payload, ensure_ascii=False, default=str)
    return [needle for needle in (s.bob_id, BOB_ONLY, "Zebrafink.") if needle in dumped]


async def test_tokens_are_bound_to_a_user(client) -> None:
    tenant = await make_tenant(client)
    issued = await _token(client, tenant.id, ["read"], "carol")
    assert issued["user_id"] == "carol"
    # the tenant's own call, with its admin token
    own = await client.post(
        "/v1/tokens", json={"scopes": ["write"], "user_id": "dave"}, headers=tenant.admin
    )
    assert own.status_code == 201 and own.json()["user_id"] == "dave"
    unbound = await client.post("/v1/tokens", json={"scopes": ["read"]}, headers=tenant.admin)
    assert unbound.status_code == 201 and unbound.json()["user_id"] is None
    assert (
        await client.post("/v1/tokens", json={"scopes": ["read"]}, headers=tenant.write)
    ).status_code == 403
    # a user-bound admin token mints tokens of its own user only
    carol_admin = _bearer((await _token(client, tenant.id, ["admin"], "carol"))["token"])
    for_carol = await client.post("/v1/tokens", json={"scopes": ["read"]}, headers=carol_admin)
    assert for_carol.status_code == 201 and for_carol.json()["user_id"] == "carol"
    for_dave = await client.post(
        "/v1/tokens", json={"scopes": ["read"], "user_id": "dave"}, headers=carol_admin
    )
    assert for_dave.status_code == 403
    for bad in ("", "a\nb", "x" * 201):
        refused = await client.post(
            f"/v1/admin/tenants/{tenant.id}/tokens",
            json={"scopes": ["read"], "user_id": bad},
            headers=ADMIN_HEADERS,
        )
        assert refused.status_code == 422 and "user_id" in refused.text, refused.text


async def test_writes_through_a_user_token_are_that_users(client, scoped: Scoped) -> None:
    s = scoped
    bobs = (await client.get(f"/v1/memories/{s.bob_id}", headers=s.bob)).json()
    assert bobs["user_id"] == "bob"
    batch = await client.post(
        "/v1/memories/batch",
        json={"items": [{"content": "Alice mag Kaffee.", "user_id": "bob"}]},
        headers=s.alice,
    )
    assert batch.status_code == 200, batch.text
    stored = batch.json()["results"][0]["id"]
    assert (await client.get(f"/v1/memories/{stored}", headers=s.alice)).json()[
        "user_id"
    ] == "alice"
    tool = await ok(
        client, s.alice, "knowmind_store_memory", {"content": "Alice mag Tee.", "user_id": "bob"}
    )
    got = await client.get(f"/v1/memories/{tool['id']}", headers=s.tenant.read)
    assert got.json()["user_id"] == "alice"
    # the tenant-wide token reads everyone's, and may say whose a memory is
    listed = await client.get("/v1/memories", params={"user_id": "bob"}, headers=s.tenant.read)
    assert [m["id"] for m in listed.json()["items"]] == [s.bob_id]


async def test_a_user_token_reads_its_own_and_the_shared_memories_only(client, scoped) -> None:
    s = scoped
    assert (await client.get(f"/v1/memories/{s.alice_id}", headers=s.alice)).status_code == 200
    assert (await client.get(f"/v1/memories/{s.shared_id}", headers=s.alice)).status_code == 200
    assert (await client.get(f"/v1/memories/{s.bob_id}", headers=s.alice)).status_code == 404
    listed = (await client.get("/v1/memories", headers=s.alice)).json()["items"]
    assert {m["id"] for m in listed} == {s.alice_id, s.shared_id}
    asked = await client.get("/v1/memories", params={"user_id": "bob"}, headers=s.alice)
    assert asked.json()["items"] == []
    everyone = (await client.get("/v1/memories", headers=s.tenant.read)).json()["items"]
    assert {m["id"] for m in everyone} == {s.alice_id, s.shared_id, s.bob_id}

    leaks: list[tuple[str, list[str]]] = []
    for question in QUESTIONS:
        for body in (
            {"query": question, "k": 10, "explain": True},
            {"query": question, "k": 10, "filters": {"user_id": "bob"}},
            {"query": question, "k": 10, "stages": ["graph", "identity", "relations"]},
            {"query": question, "k": 10, "stages": ["statements", "bm25"], "rerank": False},
            {"query": question, "k": 10, "as_of": "2999-01-01T00:00:00Z"},
        ):
            found = await client.post("/v1/recall", json=body, headers=s.alice)
            assert found.status_code == 200, found.text
            assert {h["memory_id"] for h in found.json()["results"]} <= {s.alice_id, s.shared_id}
            leaks.append((question, _leaks(found.json(), s)))
        answered = await client.post(
            "/v1/answer",
            json={"question": question, "k": 10, "parent_context": True},
            headers=s.alice,
        )
        assert answered.status_code == 200, answered.text
        leaks.append((question, _leaks(answered.json(), s)))
    assert [leak for leak in leaks if leak[1]] == []
    # Bob, and the tenant-wide token, do find it
    bobs = await client.post("/v1/recall", json={"query": QUESTIONS[0]}, headers=s.bob)
    assert s.bob_id in {h["memory_id"] for h in bobs.json()["results"]}
    tenant_wide = await client.post(
        "/v1/recall", json={"query": QUESTIONS[0]}, headers=s.tenant.read
    )
    assert s.bob_id in {h["memory_id"] for h in tenant_wide.json()["results"]}


async def test_a_user_token_cannot_change_or_erase_what_it_does_not_own(client, scoped) -> None:
    s = scoped
    for path in (f"/v1/memories/{s.bob_id}", f"/v1/memories/{s.bob_id}?erase=true"):
        assert (await client.delete(path, headers=s.alice)).status_code == 404
    supersede = {"new_content": "Das Passwort lautet Amsel.", "new_title": "x"}
    refused = await client.post(
        f"/v1/memories/{s.bob_id}/supersede", json=supersede, headers=s.alice
    )
    assert refused.status_code == 404
    # the shared memory: read, never changed or erased by one user
    for path in (f"/v1/memories/{s.shared_id}", f"/v1/memories/{s.shared_id}?erase=true"):
        assert (await client.delete(path, headers=s.alice)).status_code == 403
    refused = await client.post(
        f"/v1/memories/{s.shared_id}/supersede", json=supersede, headers=s.alice
    )
    assert refused.status_code == 403
    assert (await client.get(f"/v1/jobs/{s.bob_job}", headers=s.alice)).status_code == 404
    assert (await client.get(f"/v1/jobs/{s.bob_job}", headers=s.bob)).status_code == 200
    assert (await client.get(f"/v1/nodes/{s.bob_id}/relations", headers=s.alice)).status_code == 404
    erase_bob = await client.delete("/v1/users/bob", headers=s.alice_admin)
    assert erase_bob.status_code == 403
    # what the whole tenant shares: documents, the graph, the settings
    refusals = [
        await client.post("/v1/documents", json={"content": "x", "title": "y"}, headers=s.alice),
        await client.post(
            "/v1/entities", json={"name": "X", "entity_class": "Person"}, headers=s.alice
        ),
        await client.patch("/v1/settings", json={"multi_query": True}, headers=s.alice_admin),
        await client.get(f"/v1/admin/tenants/{s.tenant.id}/export", headers=s.alice_admin),
    ]
    assert [r.status_code for r in refusals] == [403, 403, 403, 403]
    # and everything is still there
    for memory_id in (s.bob_id, s.shared_id):
        row = await client.get(f"/v1/memories/{memory_id}", headers=s.tenant.read)
        assert row.status_code == 200 and row.json()["valid_to"] is None
    relations = await client.get(f"/v1/nodes/{s.bob_id}/relations", headers=s.tenant.read)
    assert relations.json()


async def test_the_graph_does_not_show_another_users_memories(client, scoped) -> None:
    s = scoped
    entities = await client.get(
        "/v1/entities", params={"q": "Tresorbau Zebrafink"}, headers=s.tenant.read
    )
    assert entities.status_code == 200, entities.text
    company = entities.json()["results"][0]["id"]
    everyone = await client.get(f"/v1/nodes/{company}/relations", headers=s.tenant.read)
    mine = await client.get(f"/v1/nodes/{company}/relations", headers=s.alice)
    assert mine.status_code == 200
    assert s.bob_id in everyone.text and s.bob_id not in mine.text
    listed = await ok(client, s.alice, "knowmind_list_relations", {"memory_id": company})
    assert s.bob_id not in json.dumps(listed)


async def test_mcp_tools_hold_a_user_token_to_its_memories(client, scoped) -> None:
    s = scoped
    for question in QUESTIONS:
        for tool, extra in (
            ("knowmind_recall_memories", {}),
            ("knowmind_recall_at_time", {"as_of": "2999-01-01T00:00:00Z"}),
            ("knowmind_recall_memories", {"user_id": "bob"}),
        ):
            found = await ok(client, s.alice, tool, {"query": question, "k": 10, **extra})
            assert _leaks(found, s) == []
            assert {h["metadata"]["source_id"] for h in found["hits"]} <= {
                s.alice_id,
                s.shared_id,
            }
    recent = await ok(client, s.alice, "knowmind_list_recent", {"k": 50})
    assert {m["id"] for m in recent["items"]} == {s.alice_id, s.shared_id}
    stats = await ok(client, s.alice, "knowmind_get_stats", {})
    assert stats["memories"] == 2
    is_error, _ = await call(
        client,
        s.alice,
        "knowmind_update_fact",
        {"target_id": s.bob_id, "new_title": "x", "new_content": "Das Passwort lautet Amsel."},
    )
    assert is_error
    is_error, _ = await call(client, s.alice, "knowmind_list_relations", {"memory_id": s.bob_id})
    assert is_error
    for tool, arguments in (
        ("knowmind_upload_document", {"content": "x", "title": "y"}),
        ("knowmind_upsert_entity", {"name": "X", "entity_class": "Person"}),
        ("knowmind_link_entities", {"from_id": s.alice_id, "to_id": s.bob_id, "rel_type": "KNOWS"}),
    ):
        is_error, refused = await call(client, s.alice, tool, arguments)
        assert is_error and "user-bound" in json.dumps(refused), (tool, refused)


async def test_row_level_security_holds_a_user_session_in_the_database(db, scoped) -> None:
    """As the app role with the session's settings set, whatever the SQL says."""
    s = scoped
    alice = UserScope(UUID(s.tenant.id), "alice")
    async with db.tenant_tx(alice) as conn:
        seen = set((await conn.execute(text("SELECT CAST(id AS text) FROM memories"))).scalars())
        assert seen == {s.alice_id, s.shared_id}
        assert (
            await conn.scalar(
                text("SELECT count(*) FROM chunks WHERE memory_id = :m"), {"m": s.bob_id}
            )
            == 0
        )
        assert await conn.scalar(text("SELECT count(*) FROM chunks WHERE user_id = 'bob'")) == 0
        # a user's session writes, changes and deletes its own rows only
        for statement in (
            "UPDATE memories SET title = 'x' WHERE id = :m",
            "DELETE FROM chunks WHERE memory_id = :m",
            "DELETE FROM memories WHERE id = :m",
        ):
            for memory in (s.bob_id, s.shared_id):
                done = await conn.execute(text(statement), {"m": memory})
                assert done.rowcount == 0, (statement, memory)
    for owner in ("bob", None):
        async with db.tenant_tx(alice) as conn:
            with pytest.raises(DBAPIError, match="row-level security"):
                await conn.execute(
                    text(
                        "INSERT INTO memories (tenant_id, content, content_sha256, user_id) "
                        "VALUES (:t, 'Untergeschoben', '\\x01', :u)"
                    ),
                    {"t": s.tenant.id, "u": owner},
                )
    # the settings themselves: what the session carries
    async with db.tenant_tx(alice) as conn:
        assert (await conn.exec_driver_sql("SHOW app.user_id")).scalar() == "alice"
    async with db.read(alice) as raw:
        assert await raw.fetchval("SELECT current_setting('app.user_id')") == "alice"
        assert (
            await raw.fetchval("SELECT count(*) FROM memories WHERE id = $1", UUID(s.bob_id)) == 0
        )
    async with db.read(UUID(s.tenant.id)) as raw:  # the same pool: the user is gone again
        assert not await raw.fetchval("SELECT current_setting('app.user_id', true)")
        assert await raw.fetchval("SELECT count(*) FROM memories") == 3


def test_a_user_scope_is_its_tenant_and_names_its_user() -> None:
    tenant = UUID(int=7)
    scope = UserScope(tenant, "o'brien")
    assert scope == tenant and hash(scope) == hash(tenant) and str(scope) == str(tenant)
    assert user_of(scope) == "o'brien" and user_of(tenant) is None
    assert set_user_sql("o'brien") == "SET LOCAL app.user_id = 'o''brien'"
    assert set_user_sql(None) == "SET LOCAL app.user_id = ''"
    with pytest.raises(ValueError):
        UserScope(tenant, "a\nb")
    with pytest.raises(ValueError):
        set_user_sql("x\n'; RESET ALL; --")


async def test_erasure_of_one_user_with_a_receipt(client, db, scoped) -> None:
    s = scoped
    thread = {"question": "Was gibt es Neues?", "conversation_id": str(uuid4())}
    answered = await client.post("/v1/answer", json=thread, headers=s.bob)
    assert answered.status_code == 200 and answered.json()["conversation_id"], answered.text
    bob_admin = _bearer((await _token(client, s.tenant.id, ["admin"], "bob"))["token"])
    receipt = await client.delete("/v1/users/bob", headers=bob_admin)  # a user erases itself
    assert receipt.status_code == 200, receipt.text
    body = receipt.json()
    erased = body["erased"]
    assert body["user_id"] == "bob" and body["audit_id"] > 0
    assert erased["memories"] == 1 and erased["chunks"] >= 1 and erased["edges"] >= 1
    assert erased["jobs"] >= 1 and erased["vectors"] == erased["chunks"]
    assert erased["conversations"] >= 1
    assert (await client.get(f"/v1/memories/{s.bob_id}", headers=s.tenant.read)).status_code == 404
    left = {
        m["id"] for m in (await client.get("/v1/memories", headers=s.tenant.read)).json()["items"]
    }
    assert left == {s.alice_id, s.shared_id}
    async with db.owner_tx() as conn:
        entry = (
            await conn.execute(
                text("SELECT action, targets, detail FROM audit_log WHERE id = :i"),
                {"i": body["audit_id"]},
            )
        ).one()
        rows = await conn.scalar(
            text("SELECT count(*) FROM chunks WHERE tenant_id = :t AND user_id = 'bob'"),
            {"t": s.tenant.id},
        )
    assert entry.action == "user.erase" and entry.targets == [s.bob_id]
    assert "bob" not in json.dumps(entry.detail) and entry.detail["user_sha256"]
    assert rows == 0
    # the tenant admin erases any user; the server admin names the tenant
    by_tenant = await client.delete("/v1/users/alice", headers=s.tenant.admin)
    assert by_tenant.status_code == 200 and by_tenant.json()["erased"]["memories"] == 1
    again = await client.delete(
        f"/v1/admin/tenants/{s.tenant.id}/users/alice", headers=ADMIN_HEADERS
    )
    assert again.status_code == 200 and again.json()["erased"]["memories"] == 0
    assert (await client.delete("/v1/users/alice", headers=s.tenant.write)).status_code == 403
    control = await client.delete("/v1/users/al%11ice", headers=s.tenant.admin)
    assert control.status_code in (400, 422) and "user_id" in control.text
    assert (
        await client.get(f"/v1/memories/{s.shared_id}", headers=s.tenant.read)
    ).status_code == 200
