"""Inputs that once made the server answer 500 (or fail inside a 200): each must be a clear
4xx naming the field, with nothing written."""

from __future__ import annotations

import io
import json

import asyncpg
import pytest
import structlog
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from knowmind.logging import log_processors
from tests.conftest import count_rows

DEEP = 5000  # far past Python's recursion limit


def _nested(depth: int) -> bytes:
    return b'{"content": "x", "metadata": ' + b"[" * depth + b"]" * depth + b"}"


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/memories", _nested(DEEP)),
        ("/v1/recall", b'{"query": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
        ("/v1/documents", b'{"content": "x", "relations": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
        ("/v1/memories/batch", b'{"items": ' + b"[" * DEEP + b"]" * DEEP + b"}"),
    ],
)
async def test_deeply_nested_json_is_a_4xx(client, tenant, path, body):
    headers = {**tenant.write, "Content-Type": "application/json"}
    response = await client.post(path, content=body, headers=headers)
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["field"] == "body"


async def test_whitespace_only_document_title_is_422(client, tenant, db):
    before = await count_rows(db, "documents", tenant.id)
    response = await client.post(
        "/v1/documents", json={"content": "Inhalt", "title": "   "}, headers=tenant.write
    )
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "title"
    assert await count_rows(db, "documents", tenant.id) == before


async def test_replacing_a_document_with_a_title_another_has_is_409(client, tenant, db):
    first = await client.post(
        "/v1/documents", json={"content": "Erstes", "title": "Handbuch A"}, headers=tenant.write
    )
    second = await client.post(
        "/v1/documents", json={"content": "Zweites", "title": "Handbuch B"}, headers=tenant.write
    )
    before = await count_rows(db, "documents", tenant.id)
    clash = await client.post(
        "/v1/documents",
        json={
            "content": "Drittes",
            "title": "Handbuch A",
            "replace_document_id": second.json()["id"],
        },
        headers=tenant.write,
    )
    assert first.status_code == second.status_code == 201
    assert clash.status_code == 409, clash.text
    assert clash.json()["field"] == "title"
    assert await count_rows(db, "documents", tenant.id) == before


@pytest.mark.parametrize("value", ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"])
async def test_timestamps_outside_postgres_range_are_422(client, tenant, value):
    response = await client.post(
        "/v1/recall", json={"query": "Kantine", "as_of": value}, headers=tenant.read
    )
    assert response.status_code == 422, response.text
    assert response.json()["field"] == "as_of"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "Kantine", "k": "5"}, "k"),
        ({"query": "Kantine", "known_at": 0}, "known_at"),
        ({"query": "Kantine", "rerank": "true"}, "rerank"),
    ],
)
async def test_types_are_strict(client, tenant, body, field):
    response = await client.post("/v1/recall", json=body, headers=tenant.read)
    assert response.status_code == 422, response.text
    assert response.json()["field"] == field


async def test_database_errors_are_logged_without_the_values_they_quote(db, database_url):
    """A database error message quotes the value it refused; the log keeps the error's type,
    SQLSTATE and frames only (checked on the server's own logging setup)."""
    written = io.StringIO()
    log = structlog.wrap_logger(structlog.PrintLogger(written), processors=log_processors(True))
    secret = "Geheimzahl-4711 der Kantine"
    async with db.owner_tx() as conn:
        with pytest.raises(DBAPIError) as server_side:
            async with conn.begin_nested():
                await conn.execute(text("SELECT CAST(CAST(:v AS text) AS int)"), {"v": secret})
    raw = await asyncpg.connect(dsn=database_url.replace("postgresql+asyncpg", "postgresql"))
    try:
        with pytest.raises(asyncpg.DataError) as client_side:
            await raw.fetch("SELECT $1::int", secret)
    finally:
        await raw.close()
    assert secret in str(server_side.value.orig) and secret in str(client_side.value)
    for error in (server_side.value, client_side.value):
        try:
            raise RuntimeError("stage failed") from error
        except RuntimeError:
            log.exception("recall.stage_failed", stage="bm25")
    logged = written.getvalue()
    assert "Geheimzahl" not in logged
    lines = [json.loads(line) for line in logged.splitlines() if line.startswith("{")]
    server_chain = lines[0]["exception"]
    assert server_chain[0]["type"] == "builtins.RuntimeError"
    assert any(link.get("sqlstate") == "22P02" for link in server_chain)
    assert all(link["frames"] for link in server_chain[:2])
    assert lines[1]["exception"][1]["type"].startswith("asyncpg")
