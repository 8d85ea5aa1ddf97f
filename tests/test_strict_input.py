"""Strict input as the README promises it (issue 42, item 6), and the headers of the HTML pages
(item 7): each case refused with the status and field named, nothing stored."""

from __future__ import annotations

import hashlib
import re
import uuid

import pytest

from knowmind.api.reference import REFERENCE_CSP
from knowmind.api.strict_body import duplicate_key
from tests.conftest import count_rows

ZERO_WIDTH = "\u200b\u200b\u2060\ufeff"


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/memories", {"content": "x", "bogus": 1}, "bogus"),
        (
            "/v1/memories",
            {"content": "x", "relations": [{"predicate": "KNOWS", "object": "A", "weight": 2}]},
            "relations[0].weight",
        ),
        ("/v1/recall", {"query": "Kantine", "filters": {"colour": "red"}}, "filters.colour"),
        ("/v1/documents", {"content": "Inhalt", "tittle": "Tippfehler"}, "tittle"),
        ("/v1/entities", {"name": "Acme", "entity_class": "Organization", "kind": "x"}, "kind"),
        ("/v1/answer", {"question": "Wer?", "temperature": 0.2}, "temperature"),
    ],
)
async def test_unknown_fields_are_422_naming_them(client, tenant, db, path, body, field):
    before = await count_rows(db, "memories", tenant.id)
    response = await client.post(path, json=body, headers=tenant.admin)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field
    assert field.rsplit(".", 1)[-1] in response.json()["detail"]
    assert await count_rows(db, "memories", tenant.id) == before


async def test_every_unknown_field_is_named(client, tenant):
    response = await client.post(
        "/v1/memories", json={"content": "x", "bogus": 1, "extra": 2}, headers=tenant.write
    )
    assert response.status_code == 422, response.text
    assert "`bogus`" in response.json()["detail"] and "`extra`" in response.json()["detail"]


async def test_an_unknown_field_in_a_batch_item_fails_that_item(client, tenant):
    response = await client.post(
        "/v1/memories/batch",
        json={"items": [{"content": "Eins."}, {"content": "Zwei.", "importance": "hoch"}]},
        headers=tenant.write,
    )
    assert response.status_code == 200, response.text
    first, second = response.json()["results"]
    assert first["status"] == "created"
    assert second["status"] == "error" and second["error"]["field"] == "importance"


async def test_knowmind_upload_ignores_unknown_keys_by_design(client, tenant):
    """knowmind's wire format (its CLI may send more keys in a later version)."""
    response = await client.post(
        "/api/documents",
        json={"title": "Notiz", "content": "Die Kantine öffnet um acht.", "future": True},
        headers=tenant.write,
    )
    assert response.status_code in (200, 201), response.text


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/recall", {"query": "Kantine", "k": 5.0}, "k"),
        ("/v1/recall", {"query": "Kantine", "hops": 1.0}, "hops"),
        ("/v1/answer", {"question": "Wer?", "max_tokens": 64.0}, "max_tokens"),
    ],
)
async def test_an_integer_is_spelled_as_one(client, tenant, path, body, field):
    response = await client.post(path, json=body, headers=tenant.read)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/memories", {"content": ZERO_WIDTH}, "content"),
        ("/v1/memories", {"content": " \u00a0\u3000\u200b\n"}, "content"),
        ("/v1/documents", {"content": ZERO_WIDTH}, "content"),
        ("/v1/documents", {"content": "Inhalt", "title": ZERO_WIDTH}, "title"),
        ("/api/documents", {"title": "Notiz", "content": ZERO_WIDTH}, None),
        ("/v1/recall", {"query": ZERO_WIDTH}, "query"),
        ("/v1/answer", {"question": ZERO_WIDTH}, "question"),
    ],
)
async def test_content_needs_a_visible_character(client, tenant, db, path, body, field):
    before = await count_rows(db, "memories", tenant.id)
    response = await client.post(path, json=body, headers=tenant.write)
    assert response.status_code == 422, response.text
    if field is None:  # knowmind's error body: {"error": "..."}
        assert response.json()["error"].startswith("content:")
    else:
        assert response.json()["field"] == field
    assert await count_rows(db, "memories", tenant.id) == before


async def test_a_zero_width_batch_item_fails_alone(client, tenant):
    response = await client.post(
        "/v1/memories/batch", json={"items": [{"content": ZERO_WIDTH}]}, headers=tenant.write
    )
    assert response.json()["results"][0]["error"]["field"] == "content"


async def test_superseding_with_invisible_content_is_422(client, tenant):
    stored = await client.post("/v1/memories", json={"content": "Alt."}, headers=tenant.write)
    response = await client.post(
        f"/v1/memories/{stored.json()['id']}/supersede",
        json={"new_content": ZERO_WIDTH},
        headers=tenant.write,
    )
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "new_content"


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/v1/memories", b'{"content": "harmlos", "content": "anders"}', "content"),
        ("/v1/memories", b'{"content": "x", "tags": ["a"], "t\\u0061gs": ["b"]}', "tags"),
        (
            "/v1/memories",
            b'{"content": "x", "relations": [{"predicate": "KNOWS", "object": "A", '
            b'"object": "B"}]}',
            "object",
        ),
        ("/v1/recall", b'{"query": "Kantine", "k": 3, "k": 25}', "k"),
        ("/api/documents", b'{"title": "A", "content": "x", "title": "B"}', "title"),
    ],
)
async def test_a_key_twice_is_400_naming_it(client, tenant, db, path, body, key):
    before = await count_rows(db, "memories", tenant.id)
    headers = {**tenant.write, "Content-Type": "application/json"}
    response = await client.post(path, content=body, headers=headers)
    assert response.status_code == 400, response.text
    said = response.json()
    assert said.get("field", key) == key and key in str(said.get("detail", said.get("error")))
    assert await count_rows(db, "memories", tenant.id) == before


def test_duplicate_keys_are_found_only_where_they_are():
    assert duplicate_key(b'{"a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]}') is None
    assert duplicate_key(b'{"a": "{\\"a\\": 1, \\"a\\": 2}", "b": "a:"}') is None
    assert duplicate_key(b'[{"x": 1}, {"y": {"z": 1, "z": 2}}]') == "z"
    assert duplicate_key(b'{"\\u00e4": 1, "\xc3\xa4": 2}') == "ä"


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("text/plain", b'{"content": "als Text"}'),
        ("text/plain;charset=UTF-8", b'{"content": "fetch ohne Header"}'),
        ("application/x-www-form-urlencoded", b'{"content": "curl -d"}'),
        ("multipart/form-data; boundary=x", b'{"content": "multipart"}'),
        (None, b'{"content": "ohne Content-Type"}'),
    ],
)
async def test_json_only_under_a_json_content_type(client, tenant, db, content_type, body):
    before = await count_rows(db, "memories", tenant.id)
    headers = dict(tenant.write)
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = await client.post("/v1/memories", content=body, headers=headers)
    assert response.status_code == 415, response.text
    assert "application/json" in response.json()["detail"]
    assert await count_rows(db, "memories", tenant.id) == before


async def test_a_multipart_form_is_415(client, tenant):
    response = await client.post(
        "/v1/memories", files={"content": ("a.txt", b"Inhalt")}, headers=tenant.write
    )
    assert response.status_code == 415, response.text
    knowmind = await client.post(
        "/api/documents", data={"title": "A", "content": "x"}, headers=tenant.write
    )
    assert knowmind.status_code == 415 and "error" in knowmind.json()


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/x+json"])
async def test_json_content_types_are_accepted(client, tenant, content_type):
    headers = {**tenant.write, "Content-Type": content_type}
    body = f'{{"content": "Typ {uuid.uuid4()}"}}'.encode()
    response = await client.post("/v1/memories", content=body, headers=headers)
    assert response.status_code == 201, response.text


async def test_the_openapi_document_states_the_refusals(client):
    schema = (await client.get("/schema/openapi.json")).json()
    remember = schema["paths"]["/v1/memories"]["post"]["responses"]
    assert {"400", "415", "422"} <= set(remember)
    memory_in = schema["components"]["schemas"]["MemoryIn"]
    assert memory_in["additionalProperties"] is False
    assert "additionalProperties" not in schema["components"]["schemas"]["KnowmindDocumentIn"]
    blank = re.compile(memory_in["properties"]["content"]["not"]["pattern"])
    assert blank.match(ZERO_WIDTH) and not blank.match("\u200bx")


# -- headers (item 7) --------------------------------------------------------------------------


async def test_html_pages_have_one_charset_and_a_policy(client):
    for path in ("/ui", "/schema", "/schema/reference", "/schema/nowhere"):
        page = await client.get(path)
        content_type = page.headers["content-type"]
        assert content_type.startswith("text/html"), path
        assert content_type.lower().count("charset") == 1, (path, content_type)
        assert page.headers["x-frame-options"] == "DENY", path
        policy = page.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in policy and "script-src" not in policy.replace(
            "script-src 'self'", ""
        ), path
        assert "unsafe-inline" not in policy, path
    for asset in ("/ui/static/app.js", "/ui/static/app.css"):
        served = await client.get(asset)
        assert served.headers["content-type"].lower().count("charset") == 1, asset


async def test_the_reference_page_style_is_the_one_its_policy_allows(client):
    import base64

    page = (await client.get("/schema")).text
    styles = re.findall(r"<style>(.*?)</style>", page, re.DOTALL)
    assert len(styles) == 1
    digest = base64.b64encode(hashlib.sha256(styles[0].encode()).digest()).decode()
    assert f"'sha256-{digest}'" in REFERENCE_CSP
    assert "<script" not in page
