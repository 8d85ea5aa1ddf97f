"""Event time, speaker and scopes on every memory (issue 43, items 1 and 6): the fields through
REST (single and batch), MCP and the Python client, shown wherever a memory is; the filters
``occurred_after``/``occurred_before`` and ``user_id``/``agent_id``/``session_id`` on recall,
list, the MCP recall tools, the client and the tenant export; the defaults in the database."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import msgspec
from sqlalchemy import text

from knowmind.client import AsyncKnowmind
from tests.conftest import ADMIN_HEADERS, TenantAccess
from tests.test_mcp import call, ok

TURNS = [
    {
        "content": "Caroline erzählte, dass sie im Mai 2023 einen Töpferkurs in Lissabon besucht.",
        "occurred_at": "2023-05-08T13:56:00",  # no offset: UTC
        "speaker": "Caroline",
        "role": "user",
        "user_id": "u-caroline",
        "session_id": "s-1",
    },
    {
        "content": "Melanie plant für den Sommer eine Wanderung mit ihren Kindern im Harz.",
        "occurred_at": "2023-07-20T09:00:00+02:00",
        "speaker": "Melanie",
        "role": "user",
        "user_id": "u-melanie",
        "agent_id": "coach",
        "session_id": "s-2",
    },
    {"content": "Die Kantine im Erdgeschoss öffnet werktags um halb zwölf."},
]


class _Into(httpx.AsyncBaseTransport):
    """The test client's transport, into the app it serves (on the app's own event loop)."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.inner.handle_async_request(request)


async def _remember(client, tenant: TenantAccess, body: dict) -> dict:
    response = await client.post("/v1/memories", json=body, headers=tenant.write)
    assert response.status_code in (200, 201), response.text
    return response.json()


async def _memory(client, tenant: TenantAccess, memory_id: str) -> dict:
    response = await client.get(f"/v1/memories/{memory_id}", headers=tenant.read)
    assert response.status_code == 200, response.text
    return response.json()


async def _listed(client, tenant: TenantAccess, **params: str) -> set[str]:
    response = await client.get("/v1/memories", params=params, headers=tenant.read)
    assert response.status_code == 200, response.text
    return {item["id"] for item in response.json()["items"]}


async def _recalled(client, tenant: TenantAccess, query: str, **filters: str) -> list[dict]:
    body = {"query": query, "k": 5, "filters": filters}
    response = await client.post("/v1/recall", json=body, headers=tenant.read)
    assert response.status_code == 200, response.text
    return response.json()["results"]


async def test_fields_are_stored_shown_and_default_to_the_storing_time(client, tenant):
    ids = [(await _remember(client, tenant, turn))["id"] for turn in TURNS]
    first, second, plain = [await _memory(client, tenant, i) for i in ids]
    assert first["occurred_at"] == "2023-05-08T13:56:00Z"
    assert second["occurred_at"] == "2023-07-20T07:00:00Z"  # the offset kept as the instant
    assert (first["speaker"], first["role"], first["user_id"]) == ("Caroline", "user", "u-caroline")
    assert (first["agent_id"], first["session_id"]) == (None, "s-1")
    assert (second["agent_id"], second["session_id"]) == ("coach", "s-2")
    # without an event time it is the time it was stored, to the microsecond
    assert plain["occurred_at"] == plain["created_at"]
    assert plain["speaker"] is None and plain["user_id"] is None and plain["role"] is None
    listed = (await client.get("/v1/memories", headers=tenant.read)).json()["items"]
    assert {m["id"]: m["occurred_at"] for m in listed}[ids[0]] == "2023-05-08T13:56:00Z"


async def test_the_same_words_in_another_scope_or_time_are_another_memory(client, tenant):
    base = {"content": "Ja, genau das!", "user_id": "u1", "session_id": "s1"}
    created = await _remember(client, tenant, base)
    assert created["status"] == "created"
    assert (await _remember(client, tenant, base))["status"] == "unchanged"
    others = [
        {**base, "user_id": "u2"},
        {**base, "session_id": "s2"},
        {**base, "speaker": "Anna"},
        {**base, "occurred_at": "2024-01-01T00:00:00Z"},
        {"content": base["content"]},
    ]
    for body in others:
        again = await _remember(client, tenant, body)
        assert again["status"] == "created" and again["id"] != created["id"], body
    # the same instant written another way is the same memory
    same = {**base, "occurred_at": "2024-01-01T01:00:00+01:00"}
    assert (await _remember(client, tenant, same))["status"] == "unchanged"


async def test_invalid_fields_are_refused_naming_the_field(client, tenant):
    cases = {
        "occurred_at": {"occurred_at": "9999-12-31T23:59:00-14:00"},  # year 10000 in UTC
        "speaker": {"speaker": ""},
        "role": {"role": "x" * 61},
        "user_id": {"user_id": "a\nb"},
        "session_id": {"session_id": "s" * 201},
    }
    for name, extra in cases.items():
        response = await client.post(
            "/v1/memories", json={"content": "Ein Fakt.", **extra}, headers=tenant.write
        )
        assert response.status_code == 422, (name, response.text)
        assert name in response.text, response.text
    response = await client.post(
        "/v1/memories", json={"content": "x", "occurred_at": "gestern"}, headers=tenant.write
    )
    assert response.status_code == 422 and "occurred_at" in response.text


async def test_list_and_recall_filter_by_scope_and_event_time(client, tenant):
    ids = [(await _remember(client, tenant, turn))["id"] for turn in TURNS]
    assert await _listed(client, tenant, user_id="u-caroline") == {ids[0]}
    assert await _listed(client, tenant, agent_id="coach") == {ids[1]}
    assert await _listed(client, tenant, session_id="s-2") == {ids[1]}
    window = {"occurred_after": "2023-05-01T00:00:00", "occurred_before": "2023-06-01T00:00:00Z"}
    assert await _listed(client, tenant, **window) == {ids[0]}
    assert await _listed(client, tenant, occurred_after="2023-07-20T07:00:00Z") >= {ids[1], ids[2]}
    assert ids[1] not in await _listed(client, tenant, occurred_before="2023-07-20T07:00:00Z")
    bad = await client.get("/v1/memories", params={"occurred_after": "nie"}, headers=tenant.read)
    assert bad.status_code == 422

    question = "Was macht Caroline im Mai in Lissabon?"
    every = await _recalled(client, tenant, question)
    assert every[0]["memory_id"] == ids[0]
    hit = every[0]
    assert (hit["occurred_at"], hit["speaker"], hit["role"]) == (
        "2023-05-08T13:56:00Z",
        "Caroline",
        "user",
    )
    assert {
        h["memory_id"] for h in await _recalled(client, tenant, question, user_id="u-melanie")
    } <= {ids[1]}
    scoped = await _recalled(client, tenant, question, session_id="s-1")
    assert [h["memory_id"] for h in scoped] == [ids[0]]
    late = await _recalled(client, tenant, question, occurred_after="2023-06-01T00:00:00Z")
    assert ids[0] not in {h["memory_id"] for h in late} and late
    early = await _recalled(client, tenant, question, occurred_before="2023-06-01T00:00:00Z")
    assert [h["memory_id"] for h in early] == [ids[0]]


async def test_batch_items_carry_the_fields(client, tenant):
    items = [TURNS[0], {**TURNS[1], "occurred_at": "10000-01-01T00:00:00Z"}, TURNS[2]]
    response = await client.post("/v1/memories/batch", json={"items": items}, headers=tenant.write)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["created", "error", "created"]
    assert results[1]["error"]["field"] == "occurred_at"
    stored = await _memory(client, tenant, results[0]["id"])
    assert (stored["speaker"], stored["session_id"]) == ("Caroline", "s-1")
    assert stored["occurred_at"] == "2023-05-08T13:56:00Z"


async def test_mcp_store_and_recall_tools(client, tenant):
    stored = await ok(client, tenant.write, "knowmind_store_memory", TURNS[0])
    await ok(client, tenant.write, "knowmind_store_memory", TURNS[1])
    memory = await _memory(client, tenant, stored["id"])
    assert (memory["speaker"], memory["role"], memory["user_id"]) == (
        "Caroline",
        "user",
        "u-caroline",
    )
    assert memory["occurred_at"] == "2023-05-08T13:56:00Z"
    question = {"query": "Töpferkurs in Lissabon", "k": 3}
    found = await ok(client, tenant.read, "knowmind_recall_memories", question)
    assert found["hits"][0]["metadata"]["source_id"] == stored["id"]
    metadata = found["hits"][0]["metadata"]
    assert (metadata["speaker"], metadata["role"]) == ("Caroline", "user")
    assert metadata["occurred_at"] == "2023-05-08T13:56:00Z"
    assert found["results"][0]["occurred_at"] == "2023-05-08T13:56:00Z"
    other = await ok(
        client, tenant.read, "knowmind_recall_memories", question | {"user_id": "u-melanie"}
    )
    assert stored["id"] not in {h["metadata"]["source_id"] for h in other["hits"]}
    later = await ok(
        client,
        tenant.read,
        "knowmind_recall_at_time",
        question | {"occurred_after": "2023-06-01T00:00:00Z", "session_id": "s-2"},
    )
    assert stored["id"] not in {h["metadata"]["source_id"] for h in later["hits"]}
    is_error, refused = await call(
        client, tenant.write, "knowmind_store_memory", {"content": "x", "user_id": ""}
    )
    assert is_error and "user_id" in str(refused)
    is_error, refused = await call(
        client,
        tenant.write,
        "knowmind_store_memory",
        {"content": "x", "occurred_at": "9999-12-31T23:59:00-14:00"},
    )
    assert is_error and "occurred_at" in str(refused)
    listed = await ok(client, tenant.read, "knowmind_list_recent", {"k": 5})
    shown = {item["id"]: item for item in listed["items"]}[stored["id"]]
    assert shown["occurred_at"] == "2023-05-08T13:56:00Z" and shown["speaker"] == "Caroline"


async def test_the_python_client_passes_and_types_the_fields(client, tenant):
    token = tenant.write["Authorization"].removeprefix("Bearer ")
    transport = _Into(client._transport)
    async with AsyncKnowmind("http://knowmind", token, transport=transport) as km:
        when = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
        fields = {k: v for k, v in TURNS[0].items() if k not in ("content", "occurred_at")}
        stored = await km.remember(TURNS[0]["content"], occurred_at=when, **fields)
        batch = await km.remember_many([{**TURNS[1], "occurred_at": datetime(2023, 7, 20)}])
        assert batch.created == 1
        memory = await km.memory(stored.id)
        assert memory.occurred_at == when and memory.speaker == "Caroline"
        assert (memory.role, memory.user_id, memory.session_id) == ("user", "u-caroline", "s-1")
        mine = [m.id async for m in km.memories(user_id="u-caroline")]
        assert mine == [stored.id]
        window = [m.id async for m in km.memories(occurred_before=datetime(2023, 6, 1, tzinfo=UTC))]
        assert window == [stored.id]
        found = await km.recall(
            "Töpferkurs in Lissabon", k=3, filters={"occurred_after": datetime(2023, 5, 1)}
        )
        assert found.results[0].memory_id == stored.id
        assert found.results[0].occurred_at == when and found.results[0].speaker == "Caroline"
        other = await km.recall("Töpferkurs in Lissabon", k=3, filters={"user_id": "u-melanie"})
        assert stored.id not in {hit.memory_id for hit in other.results}


async def test_export_filters_by_user_and_event_time(client, tenant):
    ids = [(await _remember(client, tenant, turn))["id"] for turn in TURNS]
    url = f"/v1/admin/tenants/{tenant.id}/export"

    async def exported(**params: str) -> dict[str, list[dict]]:
        response = await client.get(url, params=params, headers=ADMIN_HEADERS)
        assert response.status_code == 200, response.text
        kinds: dict[str, list[dict]] = {}
        for line in response.text.splitlines():
            record = msgspec.json.decode(line)
            kinds.setdefault(record["type"], []).append(record)
        return kinds

    whole = await exported()
    assert {m["id"] for m in whole["memory"]} == set(ids)
    first = {m["id"]: m for m in whole["memory"]}[ids[0]]
    assert (first["occurred_at"], first["speaker"], first["speaker_role"]) == (
        "2023-05-08T13:56:00Z",
        "Caroline",
        "user",
    )
    caroline = await exported(user_id="u-caroline")
    assert [m["id"] for m in caroline["memory"]] == [ids[0]]
    assert {c["memory_id"] for c in caroline["chunk"]} == {ids[0]}
    assert caroline["trailer"][0]["counts"]["memory"] == 1
    assert "conversation" not in caroline
    summer = await exported(occurred_after="2023-07-01T00:00:00Z", agent_id="coach")
    assert [m["id"] for m in summer["memory"]] == [ids[1]]
    refused = await client.get(url, params={"user_id": "a\tb"}, headers=ADMIN_HEADERS)
    assert refused.status_code == 422


async def test_database_defaults_event_time_and_the_chunks_user(client, tenant, db):
    stored = await _remember(client, tenant, TURNS[0])
    async with db.owner_tx() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT DISTINCT c.user_id FROM chunks c WHERE c.tenant_id = :t "
                    "AND c.memory_id = :m"
                ),
                {"t": tenant.id, "m": stored["id"]},
            )
        ).all()
        assert [r[0] for r in row] == ["u-caroline"]
        # a writer that leaves the event time out (an old archive, a bulk COPY) gets created_at
        inserted = (
            await conn.execute(
                text(
                    "INSERT INTO memories (tenant_id, content, content_sha256) "
                    "VALUES (:t, 'Roh eingefügt.', '\\x00') RETURNING occurred_at = created_at"
                ),
                {"t": tenant.id},
            )
        ).scalar_one()
        assert inserted is True
        # a chunk cannot claim another user than its memory's
        forged = (
            (
                await conn.execute(
                    text(
                        "UPDATE chunks SET user_id = 'someone-else' WHERE tenant_id = :t "
                        "AND memory_id = :m RETURNING user_id"
                    ),
                    {"t": tenant.id, "m": stored["id"]},
                )
            )
            .scalars()
            .all()
        )
        assert set(forged) == {"u-caroline"}
