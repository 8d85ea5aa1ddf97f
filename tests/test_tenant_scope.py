"""KNOWMIND_TENANT_SCOPE=transaction (the Citus mode): every tenant read runs in its own
transaction with ``SET LOCAL app.tenant_id``, nothing stays on the session, and remember,
recall and row-level security work as with the default session scope."""

from __future__ import annotations

import uuid

import pytest
from litestar.testing import AsyncTestClient

from knowmind.app import create_app
from knowmind.db.engine import Database
from knowmind.db.tenant_scope import UserScope, set_tenant_sql, set_user_sql
from knowmind.settings import Settings, SettingsError
from tests.conftest import ADMIN_HEADERS, make_tenant


@pytest.fixture(scope="module")
async def per_transaction(settings, embedder):
    scoped = settings.with_overrides(tenant_scope="transaction")
    async with AsyncTestClient(app=create_app(scoped, embedder=embedder)) as client:
        for _ in range(600):
            if (await client.get("/ready")).status_code == 200:
                break
        yield client


async def test_recall_and_isolation_with_transaction_scope(per_transaction) -> None:
    client = per_transaction
    tenant, other = await make_tenant(client), await make_tenant(client)
    stored = await client.post(
        "/v1/memories?wait=true",
        json={"content": "Der Serverraum im Keller wird mit Stickstoff gelöscht."},
        headers=tenant.write,
    )
    assert stored.status_code == 201, stored.text
    question = {"query": "Wie wird der Serverraum gelöscht?", "k": 3}
    found = await client.post("/v1/recall", json=question, headers=tenant.read)
    assert found.status_code == 200, found.text
    hits = found.json()["results"]
    assert [h["memory_id"] for h in hits][:1] == [stored.json()["id"]]
    assert {s for h in hits for s, r in h["stages"].items() if r} >= {"bm25", "vector"}
    assert not found.json()["degraded"], found.json()["degraded_reasons"]
    elsewhere = await client.post("/v1/recall", json=question, headers=other.read)
    assert elsewhere.json()["results"] == []


async def test_the_tenant_lasts_only_as_long_as_the_transaction(database_url) -> None:
    db = Database.connect(database_url, None, 1, tenant_scope="transaction")  # one read session
    tenant = uuid.uuid4()
    try:
        async with db.read(tenant) as conn:
            assert await conn.fetchval("SELECT current_setting('app.tenant_id')") == str(tenant)
            assert await conn.fetchval("SHOW citus.propagate_set_commands") == "local"
        # the same (only) pooled session afterwards holds no tenant
        async with (await db.reader._pool("auto")).acquire() as session:
            assert not await session.fetchval("SELECT current_setting('app.tenant_id', true)")
        async with db.tenant_tx(tenant) as tx:
            assert (await tx.exec_driver_sql("SHOW app.tenant_id")).scalar() == str(tenant)
    finally:
        await db.dispose()


async def test_users_inside_a_tenant_stay_apart_with_transaction_scope(per_transaction) -> None:
    client = per_transaction
    tenant = await make_tenant(client)
    headers = {}
    for user in ("alice", "bob"):
        issued = await client.post(
            f"/v1/admin/tenants/{tenant.id}/tokens",
            json={"scopes": ["write"], "user_id": user},
            headers=ADMIN_HEADERS,
        )
        assert issued.status_code == 201, issued.text
        headers[user] = {"Authorization": f"Bearer {issued.json()['token']}"}
    stored = await client.post(
        "/v1/memories?wait=true",
        json={"content": "Bobs Schließfach im Keller hat die Nummer 4711."},
        headers=headers["bob"],
    )
    assert stored.status_code == 201, stored.text
    bob_id = stored.json()["id"]
    question = {"query": "Welche Nummer hat Bobs Schließfach?", "k": 5, "explain": True}
    for user, sees in (("alice", False), ("bob", True)):
        found = await client.post("/v1/recall", json=question, headers=headers[user])
        assert found.status_code == 200, found.text
        assert (bob_id in found.text) is sees, user
        listed = await client.get("/v1/memories", headers=headers[user])
        assert (bob_id in listed.text) is sees, user
    assert (await client.get(f"/v1/memories/{bob_id}", headers=headers["alice"])).status_code == 404


async def test_the_user_lasts_only_as_long_as_the_transaction(database_url) -> None:
    db = Database.connect(database_url, None, 1, tenant_scope="transaction")  # one read session
    tenant = uuid.uuid4()
    alice = UserScope(tenant, "alice")
    try:
        async with db.read(alice) as conn:
            assert await conn.fetchval("SELECT current_setting('app.user_id')") == "alice"
        async with (await db.reader._pool("auto")).acquire() as session:
            assert not await session.fetchval("SELECT current_setting('app.user_id', true)")
        async with db.read(tenant) as conn:  # the same session, for the whole tenant
            assert not await conn.fetchval("SELECT current_setting('app.user_id', true)")
        async with db.tenant_tx(alice) as tx:
            assert (await tx.exec_driver_sql("SHOW app.user_id")).scalar() == "alice"
        async with db.tenant_tx(tenant) as tx:
            shown = await tx.exec_driver_sql("SELECT current_setting('app.user_id', true)")
            assert not shown.scalar()
    finally:
        await db.dispose()


def test_the_setting_is_checked_and_the_id_is_never_text_from_outside() -> None:
    with pytest.raises(SettingsError, match="KNOWMIND_TENANT_SCOPE"):
        Settings.from_env({"KNOWMIND_TENANT_SCOPE": "statement"})
    with pytest.raises(ValueError):
        set_tenant_sql("x'; DROP TABLE memories; --")  # type: ignore[arg-type]
    # a user id is quoted as a literal, whatever it holds
    assert set_user_sql("x'; DROP TABLE memories; --") == (
        "SET LOCAL app.user_id = 'x''; DROP TABLE memories; --'"
    )
