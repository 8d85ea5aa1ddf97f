"""The MCP endpoint: raw JSON-RPC over the in-process app, then the official MCP SDK client
against `knowmind serve` over real HTTP."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from knowmind.api.mcp import wants_event_stream
from tests.conftest import ADMIN_HEADERS, TenantAccess, make_tenant

URL = "/api/mcp/v1"
CURRENT = {
    "knowmind_recall_memories",
    "knowmind_recall_at_time",
    "knowmind_store_memory",
    "knowmind_remember_conversation",
    "knowmind_upload_document",
    "knowmind_update_fact",
    "knowmind_upsert_entity",
    "knowmind_link_entities",
    "knowmind_unlink_entities",
    "knowmind_list_relations",
    "knowmind_list_recent",
    "knowmind_get_stats",
    "knowmind_get_health",
    "knowmind_get_schema",
    "knowmind_answer",
}
ALIASES = {
    "knowmind_recall": "knowmind_recall_memories",
    "knowmind_entity": "knowmind_upsert_entity",
    "knowmind_link": "knowmind_link_entities",
    "knowmind_unlink": "knowmind_unlink_entities",
    "knowmind_stats": "knowmind_get_stats",
    "knowmind_health": "knowmind_get_health",
    "knowmind_schema": "knowmind_get_schema",
}
REQUIRED = {
    "knowmind_recall_memories": ["query"],
    "knowmind_recall_at_time": ["query"],
    "knowmind_store_memory": ["content"],
    "knowmind_remember_conversation": ["messages"],
    "knowmind_upload_document": ["content"],
    "knowmind_update_fact": ["target_id", "new_title", "new_content"],
    "knowmind_upsert_entity": ["name", "entity_class"],
    "knowmind_link_entities": ["from_id", "to_id", "rel_type"],
    "knowmind_unlink_entities": ["from_id", "to_id", "rel_type"],
    "knowmind_list_relations": ["memory_id"],
    "knowmind_answer": ["question"],
}


async def rpc(
    client, headers: dict[str, str], method: str, params: dict[str, Any] | None = None, **extra
):
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 7, "method": method}
    if params is not None:
        body["params"] = params
    return await client.post(URL, json=body, headers=headers | extra.get("more", {}))


async def call(client, headers: dict[str, str], name: str, arguments: dict[str, Any]):
    """(isError, the parsed JSON text) of a tools/call."""
    response = await rpc(client, headers, "tools/call", {"name": name, "arguments": arguments})
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert [item["type"] for item in result["content"]] == ["text"]
    return result["isError"], json.loads(result["content"][0]["text"])


async def ok(client, headers: dict[str, str], name: str, arguments: dict[str, Any]) -> Any:
    is_error, payload = await call(client, headers, name, arguments)
    assert not is_error, payload
    return payload


# -- protocol --------------------------------------------------------------------------------


async def test_initialize_ping_and_notifications(client, tenant: TenantAccess):
    response = await rpc(
        client,
        tenant.read,
        "initialize",
        {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "pytest", "version": "1"},
        },
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert "mcp-session-id" not in response.headers  # stateless
    body = response.json()
    assert body["id"] == 7 and body["jsonrpc"] == "2.0"
    result = body["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "knowmind" and result["serverInfo"]["version"]

    notified = await client.post(
        URL, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=tenant.read
    )
    assert notified.status_code == 202 and notified.content == b""
    other = await client.post(
        URL,
        json={"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        headers=tenant.read,
    )
    assert other.status_code == 202 and other.content == b""
    a_response = await client.post(
        URL, json={"jsonrpc": "2.0", "id": 3, "result": {}}, headers=tenant.read
    )
    assert a_response.status_code == 202

    pong = await rpc(client, tenant.read, "ping")
    assert pong.json() == {"jsonrpc": "2.0", "id": 7, "result": {}}


async def test_tools_list_names_schemas_and_annotations(client, tenant: TenantAccess):
    response = await rpc(client, tenant.read, "tools/list")
    tools = {t["name"]: t for t in response.json()["result"]["tools"]}
    assert set(tools) == CURRENT | set(ALIASES)
    for name, tool in tools.items():
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and isinstance(schema["properties"], dict)
        current = ALIASES.get(name, name)
        assert schema.get("required", []) == REQUIRED.get(current, [])
        hints = tool["annotations"]
        assert {"readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"} <= set(hints)
        assert hints["destructiveHint"] is (
            current in {"knowmind_upload_document", "knowmind_unlink_entities"}
        )
        if name in ALIASES:
            assert tool["inputSchema"] == tools[current]["inputSchema"]
            assert tool["annotations"] == tools[current]["annotations"]
            assert "Deprecated" in tool["description"]
    recall = tools["knowmind_recall_memories"]["inputSchema"]["properties"]
    assert recall["k"] == {
        "type": "integer",
        "description": "number of results",
        "minimum": 1,
        "maximum": 25,
        "default": 5,
    }
    assert (recall["hops"]["minimum"], recall["hops"]["maximum"], recall["hops"]["default"]) == (
        0,
        3,
        2,
    )
    assert tools["knowmind_list_recent"]["inputSchema"]["properties"]["k"]["maximum"] == 50
    store = tools["knowmind_store_memory"]["inputSchema"]
    assert "additionalProperties" not in store  # unknown keys are ignored
    assert store["properties"]["memory_type"]["enum"] == [
        "semantic",
        "episodic",
        "procedural",
        "reference",
    ]
    assert store["properties"]["relations"]["items"]["required"] == ["predicate", "object"]
    assert tools["knowmind_get_schema"]["annotations"]["readOnlyHint"] is True
    assert tools["knowmind_store_memory"]["annotations"]["readOnlyHint"] is False


async def test_protocol_errors(client, tenant: TenantAccess):
    unknown_tool = await rpc(client, tenant.read, "tools/call", {"name": "nope", "arguments": {}})
    assert unknown_tool.status_code == 200
    assert unknown_tool.json()["error"]["code"] == -32602
    assert unknown_tool.json()["id"] == 7
    unknown_method = await rpc(client, tenant.read, "resources/list")
    assert unknown_method.json()["error"]["code"] == -32601

    malformed = await client.post(URL, content=b'{"jsonrpc": "2.0", "id": 1,', headers=tenant.read)
    assert malformed.status_code == 400
    assert malformed.json()["error"]["code"] == -32700 and malformed.json()["id"] is None

    for body, echoed in (
        ({"id": 4, "method": "ping"}, 4),  # no jsonrpc
        ({"jsonrpc": "2.0", "id": 5}, 5),  # no method
        ({"jsonrpc": "2.0", "id": 6, "method": 42}, 6),
        ({"jsonrpc": "2.0", "id": None, "method": "ping"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "ping"}, None),
        ("ping", None),
    ):
        response = await client.post(URL, json=body, headers=tenant.read)
        assert response.status_code == 400, body
        assert response.json()["error"]["code"] == -32600, body
        assert response.json()["id"] == echoed

    bad_params = await client.post(
        URL,
        json={"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": [1]},
        headers=tenant.read,
    )
    assert bad_params.json()["error"]["code"] == -32602
    bad_args = await rpc(
        client, tenant.read, "tools/call", {"name": "knowmind_get_schema", "arguments": "x"}
    )
    assert bad_args.json()["error"]["code"] == -32602

    batch = await client.post(
        URL, json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}], headers=tenant.read
    )
    assert batch.status_code == 400
    assert batch.json()["error"]["code"] == -32600 and "batch" in batch.json()["error"]["message"]

    assert (await client.get(URL, headers=tenant.read)).status_code == 405
    assert (await client.delete(URL, headers=tenant.read)).status_code == 405

    unsupported = await rpc(
        client, tenant.read, "ping", more={"MCP-Protocol-Version": "1999-01-01"}
    )
    assert unsupported.status_code == 400
    supported = await rpc(client, tenant.read, "ping", more={"MCP-Protocol-Version": "2025-06-18"})
    assert supported.status_code == 200


async def test_authentication_and_scopes(client, tenant: TenantAccess):
    for headers in (
        {},
        {"Authorization": "Bearer km_nothing_valid_here_at_all"},
        {"Authorization": "Basic x"},
    ):
        response = await rpc(client, headers, "tools/list")
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["error"]["code"] == -32001

    is_error, payload = await call(
        client, tenant.read, "knowmind_store_memory", {"content": "Lesen reicht nicht."}
    )
    assert is_error and "'write'" in payload["error"] and payload["required_scope"] == "write"
    is_error, payload = await call(
        client,
        tenant.read,
        "knowmind_link",
        {"from_id": str(uuid.uuid4()), "to_id": str(uuid.uuid4()), "rel_type": "KNOWS"},
    )
    assert is_error and payload["required_scope"] == "write"
    assert "classes" in await ok(client, tenant.read, "knowmind_get_schema", {})
    assert "classes" in await ok(client, tenant.write, "knowmind_schema", {})  # write ⊇ read

    is_error, payload = await call(client, ADMIN_HEADERS, "knowmind_get_schema", {})
    assert is_error and "tenant token" in payload["error"]


async def test_event_stream_when_preferred(client, tenant: TenantAccess):
    for accept in ("text/event-stream", "application/json;q=0.5, text/event-stream"):
        response = await rpc(client, tenant.read, "ping", more={"Accept": accept})
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.text.startswith("event: message\ndata: ")
        assert response.text.endswith("\n\n")
        data = response.text.removeprefix("event: message\ndata: ").strip()
        assert json.loads(data) == {"jsonrpc": "2.0", "id": 7, "result": {}}
    both = await rpc(
        client, tenant.read, "ping", more={"Accept": "application/json, text/event-stream"}
    )
    assert both.headers["content-type"].startswith("application/json")


def test_accept_negotiation_rule():
    assert not wants_event_stream(None)
    assert not wants_event_stream("*/*")
    assert not wants_event_stream("application/json, text/event-stream")
    assert not wants_event_stream("text/event-stream, application/json")
    assert wants_event_stream("text/event-stream")
    assert wants_event_stream("text/event-stream, */*;q=0.1")
    assert wants_event_stream("text/*, application/json;q=0.9")
    assert not wants_event_stream("text/event-stream;q=0, application/json")


# -- tools -----------------------------------------------------------------------------------


async def test_argument_validation_names_the_field(client, tenant: TenantAccess):
    cases = [
        ("knowmind_recall_memories", {}, "query", "required"),
        ("knowmind_recall_memories", {"query": "x", "k": 0}, "k", "at least 1"),
        ("knowmind_recall", {"query": "x", "k": 26}, "k", "at most 25"),
        ("knowmind_recall_memories", {"query": "x", "hops": 4}, "hops", "at most 3"),
        ("knowmind_recall_memories", {"query": "x", "k": "5"}, "k", "integer"),
        ("knowmind_recall_memories", {"query": "x", "limit": 3}, "limit", "unknown"),
        ("knowmind_recall_at_time", {"query": "x", "as_of": "gestern"}, "as_of", "ISO-8601"),
        ("knowmind_list_recent", {"k": 51}, "k", "at most 50"),
        ("knowmind_store_memory", {"content": ""}, "content", "empty"),
        ("knowmind_store_memory", {"content": "\u200b\u2060 "}, "content", "visible"),
        (
            "knowmind_remember_conversation",
            {"messages": [{"content": "Hallo"}, {"content": "\ufeff"}]},
            "messages[1].content",
            "visible",
        ),
        (
            "knowmind_update_fact",
            {"target_id": str(uuid.uuid4()), "new_title": "t", "new_content": "\u200b"},
            "new_content",
            "visible",
        ),
        ("knowmind_store_memory", {"content": "x", "memory_type": "fact"}, "memory_type", "one of"),
        ("knowmind_store_memory", {"content": "x", "tags": "a"}, "tags", "array"),
        (
            "knowmind_store_memory",
            {"content": "x", "relations": [{"object": "ACME"}]},
            "relations[0].predicate",
            "required",
        ),
        (
            "knowmind_store_memory",
            {
                "content": "x",
                "relations": [{"predicate": "WORKS_FOR", "object": "A", "confidence": 2}],
            },
            "relations[0].confidence",
            "at most 1",
        ),
        (
            "knowmind_update_fact",
            {"target_id": "abc", "new_title": "t", "new_content": "c"},
            "target_id",
            "UUID",
        ),
        ("knowmind_upsert_entity", {"name": "Anna"}, "entity_class", "required"),
        (
            "knowmind_link",
            {"from_id": str(uuid.uuid4()), "to_id": str(uuid.uuid4())},
            "rel_type",
            "required",
        ),
        ("knowmind_store_memory", {"content": "a\x00b"}, "content", "NUL"),
    ]
    for name, arguments, field, words in cases:
        is_error, payload = await call(client, tenant.write, name, arguments)
        assert is_error, (name, arguments)
        assert payload["field"] == field, (name, payload)
        assert payload["error"].startswith(f"{field}: ") and words in payload["error"], payload

    # Domain errors of the services come back the same way.
    is_error, payload = await call(
        client, tenant.write, "knowmind_upsert_entity", {"name": "Anna", "entity_class": "Alien"}
    )
    assert (
        is_error
        and payload["field"] == "entity_class"
        and "unknown entity class" in payload["error"]
    )
    is_error, payload = await call(
        client, tenant.write, "knowmind_recall_memories", {"query": "   "}
    )
    assert is_error and payload["field"] == "query"
    missing = str(uuid.uuid4())
    is_error, payload = await call(
        client, tenant.read, "knowmind_list_relations", {"memory_id": missing}
    )
    assert is_error and missing in payload["error"]


async def test_store_recall_without_initialize_and_aliases_answer_alike(client):
    tenant = await make_tenant(client)
    stored = await ok(
        client,
        tenant.write,
        "knowmind_store_memory",
        {
            "title": "Leuchtturm",
            "content": "Der Leuchtturm von Kampen auf Sylt ist 40 Meter hoch.",
            "tags": ["sylt"],
            "importance": "hoch",  # unknown keys are ignored, never guessed
            "source": None,  # null counts as not given
        },
    )
    assert stored["status"] == "created" and stored["chunks"] >= 1
    again = await ok(
        client,
        tenant.write,
        "knowmind_store_memory",
        {"content": "Der Leuchtturm von Kampen auf Sylt ist 40 Meter hoch."},
    )
    assert again == {**again, "id": stored["id"], "status": "unchanged"}
    await ok(
        client,
        tenant.write,
        "knowmind_store_memory",
        {"content": "Die Kantine bietet dienstags vegetarische Lasagne an."},
    )

    args = {"query": "Wie hoch ist der Leuchtturm auf Sylt?", "k": 1, "hops": 0}
    found = await ok(client, tenant.read, "knowmind_recall_memories", args)
    assert [r["memory_id"] for r in found["results"]] == [stored["id"]]
    hit = found["results"][0]
    assert hit["title"] == "Leuchtturm" and "40 Meter" in hit["content"] and hit["score"] > 0
    via_alias = await ok(client, tenant.read, "knowmind_recall", args)
    assert [r["memory_id"] for r in via_alias["results"]] == [stored["id"]]

    recent = await ok(client, tenant.read, "knowmind_list_recent", {"k": 1})
    assert len(recent["items"]) == 1 and recent["items"][0]["content"].startswith("Die Kantine")

    other = await make_tenant(client)
    assert (await ok(client, other.read, "knowmind_recall", args))["results"] == []


async def test_graph_tools(client, tenant: TenantAccess):
    anna = await ok(
        client,
        tenant.write,
        "knowmind_upsert_entity",
        {"name": "Anna Schmidt", "entity_class": "Person", "aliases": ["A. Schmidt"]},
    )
    assert anna["created"] is True
    same = await ok(
        client, tenant.write, "knowmind_entity", {"name": "Anna Schmidt", "entity_class": "Person"}
    )
    assert same["id"] == anna["id"] and same["created"] is False
    acme = await ok(
        client,
        tenant.write,
        "knowmind_upsert_entity",
        {"name": "ACME GmbH", "entity_class": "Organization"},
    )
    link = {"from_id": anna["id"], "to_id": acme["id"], "rel_type": "WORKS_FOR"}
    linked = await ok(client, tenant.write, "knowmind_link_entities", link | {"confidence": 0.9})
    assert linked["edge_id"] and linked["inverse_edge_id"]
    assert (await ok(client, tenant.write, "knowmind_link", link))["edge_id"] == linked["edge_id"]

    relations = await ok(client, tenant.read, "knowmind_list_relations", {"memory_id": acme["id"]})
    assert {(r["predicate"], r["direction"], r["node"]["id"]) for r in relations["relations"]} >= {
        ("WORKS_FOR", "in", anna["id"]),
        ("HAS_EMPLOYEE", "out", anna["id"]),
    }
    is_error, payload = await call(
        client, tenant.write, "knowmind_link_entities", link | {"rel_type": "HAS_SKILL"}
    )
    assert is_error and payload["field"] == "to_id"  # an Organization is no Skill

    assert (await ok(client, tenant.write, "knowmind_unlink_entities", link))["removed"] == 2
    assert (await ok(client, tenant.write, "knowmind_unlink", link))["removed"] == 0
    relations = await ok(client, tenant.read, "knowmind_list_relations", {"memory_id": acme["id"]})
    assert relations["relations"] == []

    stored = await ok(
        client,
        tenant.write,
        "knowmind_store_memory",
        {
            "content": "Anna Schmidt leitet seit März das Projekt Nordlicht.",
            "relations": [
                {"predicate": "ABOUT", "object": "Projekt Nordlicht", "object_class": "Topic"}
            ],
            "memory_type": "episodic",
        },
    )
    around = await ok(client, tenant.read, "knowmind_list_relations", {"memory_id": stored["id"]})
    assert any(
        r["predicate"] == "ABOUT" and r["node"]["title_or_name"] == "Projekt Nordlicht"
        for r in around["relations"]
    )

    catalogue = await ok(client, tenant.read, "knowmind_get_schema", {})
    assert "Person" in catalogue["classes"]
    assert any(p["name"] == "WORKS_FOR" for p in catalogue["predicates"])


async def test_documents_facts_in_time_stats_and_health(client, tenant: TenantAccess):
    doc = {"title": "Handbuch", "content": "# Handbuch\n\nDer Server startet mit knowmind serve."}
    first = await ok(client, tenant.write, "knowmind_upload_document", doc)
    assert first["status"] == "created" and first["chunks"] >= 1
    replaced = await ok(
        client,
        tenant.write,
        "knowmind_upload_document",
        doc | {"content": doc["content"] + "\n\nDer Port ist 8080."},
    )
    assert replaced["id"] == first["id"] and replaced["status"] == "replaced"

    old = await ok(
        client,
        tenant.write,
        "knowmind_store_memory",
        {"title": "Tarif", "content": "Der Stromtarif der Firma kostet 30 Cent pro kWh."},
    )
    before = datetime.now(UTC)
    new = await ok(
        client,
        tenant.write,
        "knowmind_update_fact",
        {
            "target_id": old["id"],
            "new_title": "Tarif",
            "new_content": "Der Stromtarif der Firma kostet 25 Cent pro kWh.",
            "update_reason": "neuer Vertrag",
        },
    )
    assert new["id"] != old["id"] and new["supersedes"] == old["id"]
    query = {"query": "Was kostet der Stromtarif?", "k": 1}
    then = await ok(
        client, tenant.read, "knowmind_recall_at_time", query | {"as_of": before.isoformat()}
    )
    assert [r["memory_id"] for r in then["results"]] == [old["id"]]
    now = await ok(client, tenant.read, "knowmind_recall_at_time", query)
    assert [r["memory_id"] for r in now["results"]] == [new["id"]]
    earlier = (before - timedelta(days=365)).replace(tzinfo=None).isoformat()
    assert (await ok(client, tenant.read, "knowmind_recall_at_time", query | {"as_of": earlier}))[
        "results"
    ] == []
    is_error, payload = await call(
        client,
        tenant.write,
        "knowmind_update_fact",
        {"target_id": old["id"], "new_title": "Tarif", "new_content": "Noch ein Tarif."},
    )
    assert is_error and "superseded" in payload["error"]

    stats = await ok(client, tenant.read, "knowmind_get_stats", {})
    assert stats == await ok(client, tenant.read, "knowmind_stats", {})
    assert isinstance(stats, dict) and stats
    health = await ok(client, tenant.read, "knowmind_get_health", {})
    assert health["postgres"]["status"] == "ok"
    assert (await ok(client, tenant.read, "knowmind_health", {}))["postgres"] == health["postgres"]


# -- the official SDK client against the real server -----------------------------------------


@pytest.mark.slow
async def test_official_sdk_client_against_served_process(tmp_path):
    import httpx2  # comes with the mcp SDK (a dev dependency)
    import mcp
    from mcp.client.streamable_http import streamable_http_client

    from tests.test_server_process import free_port, knowmind, run_cli, stop, wait_ready

    data_dir = tmp_path / "knowmind"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    run_cli(data_dir, "migrate")
    tenant_id = run_cli(data_dir, "tenant", "create", "acme").split()[1]
    token = (
        run_cli(data_dir, "token", "create", "--tenant", tenant_id, "--scopes", "read,write")
        .strip()
        .splitlines()[-1]
    )
    server = knowmind(data_dir, "serve", port=port, env_extra={"KNOWMIND_RERANKER": "none"})
    try:
        wait_ready(base, server)
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        async with http, mcp.Client(streamable_http_client(f"{base}{URL}", http_client=http)) as c:
            assert c.server_info.name == "knowmind"
            assert c.protocol_version == "2025-06-18"
            listed = await c.list_tools()
            assert {t.name for t in listed.tools} == CURRENT | set(ALIASES)

            async def tool(name: str, arguments: dict[str, Any]) -> Any:
                result = await c.call_tool(name, arguments)
                payload = json.loads(result.content[0].text)
                assert not result.is_error, payload
                return payload

            stored = await tool(
                "knowmind_store_memory",
                {
                    "title": "Vertrag Globex",
                    "content": "Anna Schmidt arbeitet für die Globex AG als Einkaufsleiterin.",
                    "relations": [
                        {"predicate": "ABOUT", "object": "Einkauf", "object_class": "Topic"}
                    ],
                },
            )
            found = await tool(
                "knowmind_recall_memories", {"query": "Für wen arbeitet Anna Schmidt?", "k": 3}
            )
            assert found["results"][0]["memory_id"] == stored["id"]
            around = await tool("knowmind_list_relations", {"memory_id": stored["id"]})
            assert any(r["node"]["title_or_name"] == "Einkauf" for r in around["relations"])

            anna = await tool("knowmind_entity", {"name": "Anna Schmidt", "entity_class": "Person"})
            globex = await tool(
                "knowmind_upsert_entity", {"name": "Globex AG", "entity_class": "Organization"}
            )
            link = {"from_id": anna["id"], "to_id": globex["id"], "rel_type": "WORKS_FOR"}
            assert (await tool("knowmind_link_entities", link))["edge_id"]
            assert (await tool("knowmind_unlink_entities", link))["removed"] == 2

            invalid = await c.call_tool("knowmind_recall_memories", {"query": "x", "k": 99})
            assert invalid.is_error and json.loads(invalid.content[0].text)["field"] == "k"

            before = datetime.now(UTC).isoformat()
            new = await tool(
                "knowmind_update_fact",
                {
                    "target_id": stored["id"],
                    "new_title": "Vertrag Globex",
                    "new_content": "Anna Schmidt arbeitet seit Mai für die Initech GmbH.",
                    "update_reason": "Wechsel",
                },
            )
            query = {"query": "Für wen arbeitet Anna Schmidt?", "k": 1}
            then = await tool("knowmind_recall_at_time", query | {"as_of": before})
            assert then["results"][0]["memory_id"] == stored["id"]
            assert "Globex" in then["results"][0]["content"]
            now = await tool("knowmind_recall_at_time", query)
            assert now["results"][0]["memory_id"] == new["id"]
            assert "Initech" in now["results"][0]["content"]
    finally:
        _, err = stop(server)
    assert server.returncode == 0, err
    assert '"route": "/api/mcp/v1"' in err and token not in err
