"""The audit log: every admin and erasure action leaves one entry (who, what, ids, client),
readable by the server admin, referenced by erasure receipts, never changed afterwards, and
holding no content."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from tests.conftest import ADMIN_HEADERS

SECRET = "Der Tresorcode der Filiale Kassel lautet 0815."


async def _audit(client, **params) -> list[dict]:
    response = await client.get("/v1/admin/audit", params=params, headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text
    return response.json()


async def test_admin_and_erasure_actions_are_audited(client):
    created = await client.post(
        "/v1/admin/tenants", json={"name": "audit-probe"}, headers=ADMIN_HEADERS
    )
    tenant_id = created.json()["id"]
    issued = await client.post(
        f"/v1/admin/tenants/{tenant_id}/tokens", json={"scopes": ["write"]}, headers=ADMIN_HEADERS
    )
    token_id, token = issued.json()["id"], issued.json()["token"]
    writer = {"Authorization": f"Bearer {token}"}
    stored = await client.post("/v1/memories", json={"content": SECRET}, headers=writer)
    memory_id = stored.json()["id"]
    receipt = await client.delete(f"/v1/memories/{memory_id}?erase=true", headers=writer)
    assert receipt.status_code == 200, receipt.text
    spare = await client.post(
        f"/v1/admin/tenants/{tenant_id}/tokens", json={"scopes": ["read"]}, headers=ADMIN_HEADERS
    )
    revoked = await client.delete(f"/v1/admin/tokens/{spare.json()['id']}", headers=ADMIN_HEADERS)
    assert revoked.status_code == 204
    # a refused action leaves nothing
    unknown = await client.delete(f"/v1/admin/tokens/{token_id[:-4]}0000", headers=ADMIN_HEADERS)
    assert unknown.status_code == 404
    erased = await client.delete(f"/v1/admin/tenants/{tenant_id}", headers=ADMIN_HEADERS)
    assert erased.status_code == 200

    entries = await _audit(client, tenant_id=tenant_id)
    actions = [e["action"] for e in reversed(entries)]
    assert actions == [
        "tenant.create",
        "token.create",
        "memory.erase",
        "token.create",
        "token.revoke",
        "tenant.erase",
    ]
    by_action = {e["action"]: e for e in entries}
    assert by_action["memory.erase"]["actor"] == f"token:{token_id}"
    assert by_action["memory.erase"]["targets"] == [memory_id]
    assert by_action["memory.erase"]["id"] == receipt.json()["audit_id"]
    assert by_action["tenant.erase"]["id"] == erased.json()["audit_id"]
    assert by_action["tenant.erase"]["detail"]["tenants"] == 1
    assert by_action["token.revoke"]["targets"] == [spare.json()["id"]]
    assert {e["actor"] for e in entries} == {"server-admin", f"token:{token_id}"}
    assert all(e["client"] for e in entries)
    assert "Tresorcode" not in str(entries)
    # newest first, paged by id
    older = await _audit(client, tenant_id=tenant_id, before=entries[1]["id"], limit=2)
    assert [e["id"] for e in older] == [entries[2]["id"], entries[3]["id"]]


async def test_the_audit_log_is_admin_only_and_append_only(client, tenant, db):
    assert (await client.get("/v1/admin/audit", headers=tenant.admin)).status_code == 403
    assert (
        await client.get("/v1/admin/audit", params={"limit": 0}, headers=ADMIN_HEADERS)
    ).status_code == 422
    for statement in (
        "UPDATE audit_log SET actor = 'someone else'",
        "DELETE FROM audit_log",
        "TRUNCATE audit_log",
    ):
        with pytest.raises(DBAPIError, match="append-only"):
            async with db.owner_tx() as conn:
                await conn.execute(text(statement))
    async with db.owner_tx() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM audit_log")) > 0
