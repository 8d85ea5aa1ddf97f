"""Bulk ingest: per-item results naming the bad field; each embedding group written in one
transaction, and item by item when that fails (a bad item does not fail the others, and leaves
nothing behind); embedding in groups that overlap the writes."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from uuid import UUID

import numpy as np
import pytest
from sqlalchemy import text

from knowmind import cli
from knowmind.contract.drafts import RelationIn
from knowmind.db.engine import make_engine
from knowmind.errors import InvalidInputError
from knowmind.models.executor import EmbeddingExecutor
from knowmind.services.auth import Principal
from knowmind.services.batch import (
    EMBED_GROUP_CHARS,
    EMBED_GROUP_CHUNKS,
    MAX_BATCH_ITEMS,
    ItemError,
    remember_batch,
)
from knowmind.services.graph import GraphService
from knowmind.services.memories import MemoryDraft, MemoryService
from tests.conftest import RecordingModel, count_rows, make_tenant


@pytest.fixture
async def service(db, settings, embedder):
    counting = RecordingModel(embedder)
    executor = EmbeddingExecutor(counting, max_batch=64)
    yield MemoryService(db, executor, settings.ingest, GraphService(db)), counting
    await executor.close()


async def _principal(client) -> Principal:
    tenant = await make_tenant(client)
    return Principal(UUID(tenant.id), frozenset({"write"}), language="german")


async def test_good_items_are_stored_and_bad_ones_named(client, db, service):
    memories, counting = service
    who = await _principal(client)
    items = [
        MemoryDraft(content="Die Firewall in Kassel wurde am Montag erneuert."),
        MemoryDraft(content="   "),
        MemoryDraft(content="Backup läuft nachts.", memory_type="dream"),
        MemoryDraft(
            content="Anna Meier betreut den Server.",
            relations=(RelationIn(predicate="NOT_A_PREDICATE", object="Server"),),
        ),
        ItemError("tags", "expected a list"),
        MemoryDraft(content="Die Firewall in Kassel wurde am Montag erneuert."),
        MemoryDraft(content="Der Wartungsvertrag endet im Oktober.", tags=("vertrag",)),
    ]
    results = await remember_batch(memories, who, items)
    assert [r.index for r in results] == list(range(len(items)))
    assert [r.status for r in results] == [
        "created",
        "error",
        "error",
        "error",
        "error",
        "unchanged",
        "created",
    ]
    assert results[1].error is not None and results[1].error.field == "content"
    assert results[2].error is not None and results[2].error.field == "memory_type"
    assert results[3].error is not None and results[3].error.field == "relations[0].predicate"
    assert results[4].error == ItemError("tags", "expected a list")
    assert results[5].id == results[0].id  # same content twice: stored once
    assert all(r.chunks == 1 and r.job_id for r in (results[0], results[6]))
    # the bad relation failed its item only: two memories, two chunks
    assert await count_rows(db, "memories", str(who.tenant_id)) == 2
    assert await count_rows(db, "chunks", str(who.tenant_id)) == 2
    # the three new texts that passed validation (relations included) were embedded in one call
    assert counting.passage_calls == [3]


async def test_a_repeated_batch_changes_nothing(client, db, service):
    memories, counting = service
    who = await _principal(client)
    items = [MemoryDraft(content=f"Serverraum {i} wurde gereinigt.") for i in range(5)]
    first = await remember_batch(memories, who, items)
    again = await remember_batch(memories, who, items)
    assert [r.status for r in first] == ["created"] * 5
    assert [r.status for r in again] == ["unchanged"] * 5
    assert [r.id for r in again] == [r.id for r in first]
    assert [r.chunks for r in again] == [1] * 5
    assert counting.passage_calls == [5]  # the repeat embedded nothing
    assert await count_rows(db, "memories", str(who.tenant_id)) == 5


async def test_a_full_batch_is_embedded_in_groups_while_the_last_is_stored(client, db, service):
    """100 one-chunk items: embedded in groups of EMBED_GROUP_CHUNKS (each written while the
    next one embeds), every item stored with its own vector; a bad item in the middle of a
    group fails alone."""
    memories, counting = service
    who = await _principal(client)
    items: list[MemoryDraft | ItemError] = [
        MemoryDraft(content=f"Wartungsprotokoll {i}: Lüfter im Rack {i % 7} getauscht.")
        for i in range(MAX_BATCH_ITEMS)
    ]
    items[40] = MemoryDraft(content="  ")
    results = await remember_batch(memories, who, items)
    assert [r.status for r in results].count("created") == MAX_BATCH_ITEMS - 1
    assert results[40].status == "error" and results[40].error.field == "content"
    groups = -(-(MAX_BATCH_ITEMS - 1) // EMBED_GROUP_CHUNKS)
    assert counting.passage_calls == [EMBED_GROUP_CHUNKS] * (groups - 1) + [
        (MAX_BATCH_ITEMS - 1) - EMBED_GROUP_CHUNKS * (groups - 1)
    ]
    assert await count_rows(db, "chunks", str(who.tenant_id)) == MAX_BATCH_ITEMS - 1
    async with db.tenant_tx(who.tenant_id) as conn:
        distinct = await conn.scalar(text("SELECT count(DISTINCT embedding::text) FROM chunks"))
        assert distinct == MAX_BATCH_ITEMS - 1  # no item got another group's vector
        writers = await conn.scalar(text("SELECT count(DISTINCT xmin::text) FROM memories"))
    assert writers == groups  # one transaction a group


async def test_a_group_refused_by_the_database_is_written_item_by_item(client, db, service):
    """An item only the database refuses (a trigger raising on its text) fails its group's
    transaction; the group's items are then written one transaction each, so that item alone
    fails and leaves nothing behind."""
    memories, _ = service
    who = await _principal(client)
    marker = f"refused-{uuid.uuid4().hex}"
    items: list[MemoryDraft | ItemError] = [
        MemoryDraft(content=f"Router {i} im Keller wurde neu gestartet.") for i in range(5)
    ]
    items[2] = MemoryDraft(content=f"Dieser Eintrag wird {marker}.")
    function = f"test_refuse_{marker.replace('-', '_')}"
    async with db.owner_tx() as conn:
        await conn.execute(
            text(
                f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                f"IF NEW.content LIKE '%{marker}%' THEN RAISE EXCEPTION 'refused'; END IF; "
                "RETURN NEW; END $$"
            )
        )
        await conn.execute(
            text(
                f"CREATE TRIGGER {function} BEFORE INSERT ON memories "
                f"FOR EACH ROW EXECUTE FUNCTION {function}()"
            )
        )
    try:
        results = await remember_batch(memories, who, items)
    finally:
        async with db.owner_tx() as conn:
            await conn.execute(text(f"DROP TRIGGER {function} ON memories"))
            await conn.execute(text(f"DROP FUNCTION {function}()"))
    assert [r.status for r in results] == ["created", "created", "error", "created", "created"]
    assert results[2].error is not None and results[2].error.field == ""
    assert await count_rows(db, "chunks", str(who.tenant_id)) == 4
    async with db.tenant_tx(who.tenant_id) as conn:
        writers = await conn.scalar(text("SELECT count(DISTINCT xmin::text) FROM memories"))
    assert writers == 4  # one transaction an item


async def test_a_group_written_together_keeps_each_item_its_chunks_and_order(
    client, db, service, embedder
):
    """Items of several chunks in one group: every chunk belongs to its own item, in order,
    with the vector of its own text; the memories list newest first in reverse item order."""
    memories, _ = service
    who = await _principal(client)
    topics = ["Kühlung", "Stromversorgung"]
    items: list[MemoryDraft | ItemError] = [
        MemoryDraft(
            title=topic,
            content=" ".join(
                f"Abschnitt {k}: " + f"Die Geräte der {topic} wurden geprüft. " * 9
                for k in range(3)
            ),
        )
        for topic in topics
    ]
    results = await remember_batch(memories, who, items)
    assert [r.status for r in results] == ["created"] * 2
    assert all(r.chunks >= 2 for r in results)
    async with db.tenant_tx(who.tenant_id) as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT m.id, m.title, c.context, c.ordinal, c.content, "
                    "c.embedding::text AS vector "
                    "FROM chunks c JOIN memories m ON m.id = c.memory_id "
                    "ORDER BY m.created_at, c.ordinal"
                )
            )
        ).all()
        newest_first = (
            await conn.execute(text("SELECT id FROM memories ORDER BY created_at DESC"))
        ).scalars()
        writers = await conn.scalar(text("SELECT count(DISTINCT xmin::text) FROM memories"))
        jobs = dict(
            (await conn.execute(text("SELECT id, payload ->> 'memory_id' FROM jobs"))).all()
        )
    assert writers == 1  # one group, one transaction
    assert {jobs[r.job_id] for r in results} == {str(r.id) for r in results}
    assert all(row.context == row.title for row in rows)  # each chunk its own item's title
    assert [r.id for r in reversed(results)] == list(newest_first)
    assert sum(r.chunks for r in results) == len(rows)
    for result, topic in zip(results, topics, strict=True):
        own = [row for row in rows if row.id == result.id]
        assert [row.ordinal for row in own] == list(range(result.chunks))
        assert all(topic in row.content for row in own)
    stored = np.array([json.loads(row.vector) for row in rows], dtype=np.float32)
    expected = embedder.embed_passages([f"{row.title}\n{row.content}" for row in rows])
    similarity = expected @ stored.T
    assert list(similarity.argmax(axis=1)) == list(range(len(rows)))
    assert float(similarity.diagonal().min()) > 0.99


async def test_an_item_repeating_one_of_an_earlier_group_is_unchanged(client, db, service):
    """A later group's items that repeat an earlier group's content are written by nobody:
    they answer "unchanged" with the earlier item's id."""
    memories, _ = service
    who = await _principal(client)
    items: list[MemoryDraft | ItemError] = [
        MemoryDraft(content=f"Schrank {i} im Lager wurde inventarisiert.")
        for i in range(EMBED_GROUP_CHUNKS + 2)
    ]
    items[-2:] = [items[0], items[1]]
    results = await remember_batch(memories, who, items)
    assert [r.status for r in results] == ["created"] * EMBED_GROUP_CHUNKS + ["unchanged"] * 2
    assert [r.id for r in results[-2:]] == [results[0].id, results[1].id]
    assert await count_rows(db, "memories", str(who.tenant_id)) == EMBED_GROUP_CHUNKS


async def test_groups_of_long_items_are_cut_by_characters(client, db, service):
    """Items of 300 characters: a group holds what one model batch of EMBED_GROUP_CHARS
    characters takes (6 here), so the writes follow the model batch by batch."""
    memories, counting = service
    who = await _principal(client)
    items: list[MemoryDraft | ItemError] = [
        MemoryDraft(content=f"Wartungsbericht {i:02d}: " + "Lüfter und Netzteile geprüft. " * 9)
        for i in range(20)
    ]
    assert {len(item.content.strip()) for item in items} == {289}
    per_group = EMBED_GROUP_CHARS // 289
    results = await remember_batch(memories, who, items)
    assert [r.status for r in results] == ["created"] * 20
    assert counting.passage_calls == [per_group] * (20 // per_group) + [20 % per_group]


class FailsFromCallEmbedder(RecordingModel):
    """Test double around the real model: every passage call from the n-th on fails."""

    def __init__(self, inner, failing_from: int) -> None:
        super().__init__(inner)
        self.failing_from = failing_from

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if len(self.passage_calls) + 1 >= self.failing_from:
            self.passage_batches.append(list(texts))
            raise RuntimeError("model crashed")
        return super().embed_passages(texts)


@pytest.mark.parametrize("failing_from", [1, 2])
async def test_an_embedding_failure_is_reported_exactly(
    client, db, settings, embedder, failing_from
):
    """The first group failing fails the batch (nothing stored); a later group failing leaves
    the stored items reported as created and the others as errors, nothing in between."""
    failing = FailsFromCallEmbedder(embedder, failing_from)
    executor = EmbeddingExecutor(failing, max_batch=64)
    memories = MemoryService(db, executor, settings.ingest, GraphService(db))
    who = await _principal(client)
    items = [MemoryDraft(content=f"Ticket {i}: Drucker {i} meldet Papierstau.") for i in range(40)]
    try:
        if failing_from == 1:
            with pytest.raises(RuntimeError):
                await remember_batch(memories, who, items)
            assert await count_rows(db, "memories", str(who.tenant_id)) == 0
            return
        results = await remember_batch(memories, who, items)
    finally:
        await executor.close()
    statuses = [r.status for r in results]
    assert statuses == ["created"] * EMBED_GROUP_CHUNKS + ["error"] * (40 - EMBED_GROUP_CHUNKS)
    assert all("not embedded" in r.error.message for r in results[EMBED_GROUP_CHUNKS:])
    assert await count_rows(db, "memories", str(who.tenant_id)) == EMBED_GROUP_CHUNKS


async def test_batches_are_limited(client, service):
    memories, _ = service
    who = await _principal(client)
    items = [MemoryDraft(content=f"text {i}") for i in range(MAX_BATCH_ITEMS + 1)]
    with pytest.raises(InvalidInputError) as raised:
        await remember_batch(memories, who, items)
    assert raised.value.field == "items"


async def test_batch_endpoint_answers_per_item(client, tenant):
    items = [
        {"content": "Der Drucker im zweiten Stock ist defekt.", "tags": ["it"]},
        {"content": 42},
        {"title": "ohne Inhalt"},
        {
            "content": "Anna Meier betreut den Drucker.",
            "relations": [{"predicate": "NOT_A_PREDICATE", "object": "Drucker"}],
        },
        {"content": "Metadaten mit NUL", "metadata": {"x": "a\u0000b"}},
        {"content": "Der Drucker im zweiten Stock ist defekt.", "tags": ["it"]},
    ]
    response = await client.post("/v1/memories/batch", json={"items": items}, headers=tenant.write)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["created"], body["unchanged"], body["failed"]) == (1, 1, 4)
    results = body["results"]
    assert [r["status"] for r in results] == [
        "created",
        "error",
        "error",
        "error",
        "error",
        "unchanged",
    ]
    assert [r["error"]["field"] for r in results[1:5]] == [
        "content",
        "content",
        "relations[0].predicate",
        "metadata",
    ]
    assert results[5]["id"] == results[0]["id"] and results[0]["job_id"]
    stored = await client.get(f"/v1/memories/{results[0]['id']}", headers=tenant.read)
    assert stored.json()["tags"] == ["it"]
    listed = await client.get("/v1/memories", headers=tenant.read)
    assert len(listed.json()["items"]) == 1


async def test_batch_endpoint_limits_and_scope(client, tenant):
    too_many = {"items": [{"content": f"m {i}"} for i in range(101)]}
    response = await client.post("/v1/memories/batch", json=too_many, headers=tenant.write)
    assert response.status_code == 422 and response.json()["field"] == "items"
    empty = await client.post("/v1/memories/batch", json={"items": []}, headers=tenant.write)
    assert empty.status_code == 422 and empty.json()["field"] == "items"
    read_only = await client.post(
        "/v1/memories/batch", json={"items": [{"content": "x"}]}, headers=tenant.read
    )
    assert read_only.status_code == 403


def _count_memories(url: str, tenant_id: str) -> int:
    async def count() -> int:
        engine = make_engine(url, 1)
        async with engine.connect() as conn:
            found = await conn.scalar(
                text("SELECT count(*) FROM memories WHERE tenant_id = :t"), {"t": tenant_id}
            )
        await engine.dispose()
        return int(found)

    return asyncio.run(count())


def test_cli_import_reports_each_bad_line_and_is_idempotent(
    settings, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("KNOWMIND_DATABASE_URL", settings.database.database_url)
    monkeypatch.setenv("KNOWMIND_EMBED_THREADS", "2")
    # keep the suite's logging (bound to the real stdout), not one bound to capsys' buffer
    monkeypatch.setattr(cli, "configure_logging", lambda *_: None)
    name = f"import-{uuid.uuid4().hex[:8]}"
    assert cli.main(["tenant", "create", name]) == 0
    # the line that names the tenant (run alone, the suite's log lines come before it)
    created = next(line for line in capsys.readouterr().out.splitlines() if name in line)
    tenant_id = created.split()[1]
    lines = [
        json.dumps({"content": "Der Router in Ulm wurde ersetzt.", "tags": ["netz"]}),
        json.dumps({"content": "Die Lizenz für das Ticketsystem läuft im Mai aus."}),
        "",
        "{not json",
        json.dumps({"content": ""}),
        json.dumps({"title": "Kantine", "content": "Die Kantine öffnet um 11:30 Uhr."}),
    ]
    source = tmp_path / "memories.jsonl"
    source.write_text("\n".join(lines) + "\n")
    assert cli.main(["import", str(source), "--tenant", tenant_id]) == 1
    out, err = capsys.readouterr()
    assert "3 created, 0 unchanged, 2 failed" in out
    assert "line 4: item: malformed JSON" in err and "line 5: content:" in err
    assert _count_memories(settings.database.database_url, tenant_id) == 3
    assert cli.main(["import", str(source), "--tenant", tenant_id]) == 1
    assert "0 created, 3 unchanged, 2 failed" in capsys.readouterr().out
    assert _count_memories(settings.database.database_url, tenant_id) == 3


def test_cli_import_names_a_missing_file(settings, monkeypatch, capsys):
    monkeypatch.setenv("KNOWMIND_DATABASE_URL", settings.database.database_url)
    monkeypatch.setattr(cli, "configure_logging", lambda *_: None)
    code = cli.main(["import", "/nonexistent/m.jsonl", "--tenant", str(uuid.uuid4())])
    assert code == 1 and "file:" in capsys.readouterr().err
