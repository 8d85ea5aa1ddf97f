"""``conversation_id`` on ``/v1/answer`` and MCP's ``knowmind_answer``: the client's own string
(1-200 characters, no control characters), scoped to the tenant and the token that started it
as before; a UUID keeps naming the conversation it always named (migration 0022)."""

from __future__ import annotations

from uuid import uuid4

from knowmind.contract.limits import conversation_key
from tests.conftest import count_rows, make_tenant
from tests.test_mcp import call

SMALL = {"k": 1, "max_tokens": 16}


async def _ask(client, headers: dict[str, str], conversation_id: object, question: str):
    body = {**SMALL, "question": question, "conversation_id": conversation_id}
    return await client.post("/v1/answer", json=body, headers=headers)


async def test_a_client_string_names_a_conversation(client, db) -> None:
    tenant, other = await make_tenant(client), await make_tenant(client)
    name = "minder:chat/42 – Grüße"
    first = await _ask(client, tenant.read, name, "Where is the lighthouse?")
    assert first.status_code == 200, first.text
    assert first.json()["conversation_id"] == name
    follow_up = await _ask(client, tenant.read, name, "And how tall is it?")
    assert follow_up.status_code == 200 and "condense" in follow_up.json()["timings_ms"]
    assert await count_rows(db, "conversation_turns", tenant.id) == 4
    # the token that started it only (not shared) ...
    refused = await _ask(client, tenant.write, name, "And the canteen?")
    assert refused.status_code == 404 and "conversation_id" in refused.json()["detail"]
    # ... and the same string in another tenant is a conversation of its own
    elsewhere = await _ask(client, other.read, name, "Where is the lighthouse?")
    assert elsewhere.status_code == 200 and "condense" not in elsewhere.json()["timings_ms"]
    assert await count_rows(db, "conversation_turns", other.id) == 2


async def test_a_uuid_names_the_same_conversation_in_any_form(client, db) -> None:
    tenant = await make_tenant(client)
    thread = uuid4()
    first = await _ask(client, tenant.read, str(thread).upper(), "Where is the lighthouse?")
    assert first.status_code == 200 and first.json()["conversation_id"] == str(thread)
    again = await _ask(client, tenant.read, thread.hex, "And how tall is it?")
    assert again.status_code == 200 and again.json()["conversation_id"] == str(thread)
    assert "condense" in again.json()["timings_ms"]  # the first turn's conversation
    assert conversation_key("minder-7") == "minder-7" and conversation_key(thread.hex) == str(
        thread
    )


async def test_conversation_ids_out_of_bounds_are_refused(client) -> None:
    tenant = await make_tenant(client)
    for bad in ("", "x" * 201, "line\nbreak", 42):
        refused = await _ask(client, tenant.read, bad, "Where is the lighthouse?")
        assert refused.status_code == 422, (bad, refused.text)
        assert refused.json()["field"] == "conversation_id"
    longest = await _ask(client, tenant.read, "x" * 200, "Where is the lighthouse?")
    assert longest.status_code == 200, longest.text


async def test_the_mcp_answer_tool_takes_a_client_string(client) -> None:
    tenant = await make_tenant(client)
    arguments = {"question": "Where is the lighthouse?", "conversation_id": "claude-thread-9"}
    is_error, body = await call(client, tenant.read, "knowmind_answer", arguments | SMALL)
    assert not is_error, body
    assert body["conversation_id"] == "claude-thread-9"
    is_error, refused = await call(
        client, tenant.read, "knowmind_answer", arguments | {"conversation_id": "x" * 201}
    )
    assert is_error and "conversation_id" in str(refused)
