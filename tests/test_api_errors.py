"""Auth, scopes and every input error: clear status, the field named, nothing half-written."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import ADMIN_HEADERS, count_rows

MEMORY = {"title": "Testnotiz", "content": "Die Kantine öffnet werktags um halb zwölf."}


async def test_missing_and_invalid_tokens_are_401(client, tenant):
    missing = await client.post("/v1/recall", json={"query": "x"})
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer")
    bad = await client.post(
        "/v1/recall", json={"query": "x"}, headers={"Authorization": "Bearer km_nope_nope"}
    )
    assert bad.status_code == 401
    forged = tenant.read["Authorization"][:-4] + "AAAA"
    assert (
        await client.post("/v1/recall", json={"query": "x"}, headers={"Authorization": forged})
    ).status_code == 401
    basic = await client.get("/v1/memories", headers={"Authorization": "Basic dXNlcjpwdw=="})
    assert basic.status_code == 401


async def test_scopes(client, tenant):
    read_only = await client.post("/v1/memories", json=MEMORY, headers=tenant.read)
    assert read_only.status_code == 403
    assert "write" in read_only.json()["detail"]
    # write implies read, admin implies write
    assert (await client.get("/v1/memories", headers=tenant.write)).status_code == 200
    assert (await client.post("/v1/memories", json=MEMORY, headers=tenant.admin)).status_code == 201
    # tenant tokens cannot administer the server; the admin token holds no tenant data
    assert (await client.get("/v1/admin/tenants", headers=tenant.admin)).status_code == 403
    assert (await client.get("/v1/memories", headers=ADMIN_HEADERS)).status_code == 403


async def test_revoked_token_is_rejected(client, tenant):
    issued = await client.post(
        f"/v1/admin/tenants/{tenant.id}/tokens", json={"scopes": ["read"]}, headers=ADMIN_HEADERS
    )
    headers = {"Authorization": f"Bearer {issued.json()['token']}"}
    assert (await client.get("/v1/memories", headers=headers)).status_code == 200
    revoked = await client.delete(f"/v1/admin/tokens/{issued.json()['id']}", headers=ADMIN_HEADERS)
    assert revoked.status_code == 204
    assert (await client.get("/v1/memories", headers=headers)).status_code == 401
    again = await client.delete(f"/v1/admin/tokens/{issued.json()['id']}", headers=ADMIN_HEADERS)
    assert again.status_code == 404


async def test_tokens_are_stored_only_as_hashes(client, tenant, db):
    from sqlalchemy import text

    token = tenant.read["Authorization"].split(" ", 1)[1]
    async with db.owner_tx() as conn:
        hashes = (
            await conn.execute(
                text("SELECT token_hash FROM api_tokens WHERE tenant_id = :t"), {"t": tenant.id}
            )
        ).scalars()
        stored = [bytes(h) for h in hashes]
    assert stored and all(token.encode() not in h and len(h) == 32 for h in stored)


async def test_other_tenants_ids_are_404(client, tenant, other_tenant):
    created = await client.post("/v1/memories", json=MEMORY, headers=tenant.write)
    memory_id = created.json()["id"]
    assert (
        await client.get(f"/v1/memories/{memory_id}", headers=other_tenant.read)
    ).status_code == 404
    assert (
        await client.delete(f"/v1/memories/{memory_id}", headers=other_tenant.write)
    ).status_code == 404
    assert (await client.get(f"/v1/memories/{memory_id}", headers=tenant.read)).status_code == 200
    unknown = await client.get(f"/v1/memories/{uuid.uuid4()}", headers=tenant.read)
    assert unknown.status_code == 404
    recalled = await client.post(
        "/v1/recall", json={"query": "Kantine öffnet"}, headers=other_tenant.read
    )
    assert recalled.json()["results"] == []


async def test_body_over_the_limit_is_413(client, tenant, db):
    huge = {"content": "x" * (70 * 1024)}  # the suite runs with a 64 KiB limit
    response = await client.post("/v1/memories", json=huge, headers=tenant.write)
    assert response.status_code == 413
    assert await count_rows(db, "memories", tenant.id) == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"content": ""}, "content"),
        ({"content": "   \n\t "}, "content"),
        ({"content": "Null\x00Byte"}, "content"),
        ({"content": "ok", "title": "bad\x00title"}, "title"),
        ({"content": "ok", "tags": ["a\x00"]}, "tags"),
        ({"content": "ok", "metadata": {"k": "v\x00"}}, "metadata"),
        ({"content": "ok", "memory_type": "gossip"}, "memory_type"),
        ({"content": 42}, "content"),
        ({"title": "no content"}, "content"),
    ],
)
async def test_invalid_memories_are_422_and_nothing_is_written(client, tenant, db, body, field):
    response = await client.post("/v1/memories", json=body, headers=tenant.write)
    assert response.status_code == 422, response.text
    assert response.json()["field"].startswith(field)
    assert field in response.json()["detail"]
    assert await count_rows(db, "memories", tenant.id) == 0
    assert await count_rows(db, "chunks", tenant.id) == 0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x", "k": 0}, "k"),
        ({"query": "x", "k": 26}, "k"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "a\x00b"}, "query"),
        ({"query": "x", "filters": {"memory_type": "nope"}}, "filters.memory_type"),
        ({"k": 3}, "query"),
    ],
)
async def test_invalid_recalls_are_422(client, tenant, body, field):
    response = await client.post("/v1/recall", json=body, headers=tenant.read)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field


async def test_malformed_json_is_422(client, tenant):
    response = await client.post(
        "/v1/memories",
        content=b'{"content": "unterminated',
        headers={**tenant.write, "Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["field"] == "body"


async def test_tenant_language_is_validated(client):
    bad = await client.post(
        "/v1/admin/tenants", json={"name": "x-lang", "language": "klingon"}, headers=ADMIN_HEADERS
    )
    assert bad.status_code == 422
    assert bad.json()["field"] == "language"
    listed = await client.get("/v1/admin/tenants", headers=ADMIN_HEADERS)
    assert "x-lang" not in [t["name"] for t in listed.json()]


async def test_duplicate_tenant_name_is_409(client, tenant):
    again = await client.post(
        "/v1/admin/tenants", json={"name": tenant.name}, headers=ADMIN_HEADERS
    )
    assert again.status_code == 409


async def test_token_for_unknown_tenant_is_404(client):
    response = await client.post(
        f"/v1/admin/tenants/{uuid.uuid4()}/tokens", json={"scopes": ["read"]}, headers=ADMIN_HEADERS
    )
    assert response.status_code == 404


async def test_bad_cursor_and_limit_are_rejected(client, tenant):
    cursor = await client.get("/v1/memories", params={"cursor": "garbage"}, headers=tenant.read)
    assert cursor.status_code == 422
    assert cursor.json()["field"] == "cursor"
    limit = await client.get("/v1/memories", params={"limit": 101}, headers=tenant.read)
    assert limit.status_code in (400, 422)


async def test_health_ready_and_openapi(client):
    assert (await client.get("/health")).json()["status"] == "ok"
    ready = await client.get("/ready")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"database": "ok", "schema": "ok", "embedder": "ok"}
    schema = await client.get("/schema/openapi.json")
    assert "/v1/recall" in schema.json()["paths"]
    page = await client.get("/schema")  # the reference page, rendered here: works offline
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert "/v1/recall" in html and "RecallIn" in html
    assert "<script" not in html and "http://" not in html and "https://" not in html
    assert "422" in html and "Invalid input" in html  # every documented status is listed


async def test_responses_carry_a_request_id(client):
    response = await client.get("/health", headers={"X-Request-ID": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"
    generated = await client.get("/health")
    assert len(generated.headers["x-request-id"]) == 32
