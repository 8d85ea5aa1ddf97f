"""Migrations from an empty database to head and back, and the embedder guard."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from knowmind.db.engine import make_engine
from knowmind.db.migrate import (
    SchemaError,
    check_embedding_model,
    current_revision,
    downgrade,
    head_revision,
    read_embedding_meta,
    upgrade,
)


@pytest.fixture
def empty_database_url(pg_server) -> str:
    name = f"mig_{uuid.uuid4().hex[:8]}"

    async def create() -> None:
        engine = make_engine(pg_server.url, 1)
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(f"CREATE DATABASE {name}"))
        await engine.dispose()

    asyncio.run(create())
    return make_url(pg_server.url).set(database=name).render_as_string(hide_password=False)


async def table_names(url: str) -> set[str]:
    rows = await _rows(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    return {name for (name,) in rows}


async def _rows(url: str, sql: str) -> list[tuple]:
    engine = make_engine(url, 1)
    async with engine.connect() as conn:
        rows = [tuple(row) for row in await conn.execute(text(sql))]
    await engine.dispose()
    return rows


def test_empty_to_head_and_back(empty_database_url):
    url = empty_database_url
    upgrade(url, "model-x", 8)
    assert asyncio.run(current_revision(url)) == head_revision()
    tables = asyncio.run(table_names(url))
    assert {"tenants", "api_tokens", "memories", "chunks", "knowmind_meta"} <= tables

    downgrade(url, "base")
    assert asyncio.run(current_revision(url)) is None
    assert not ({"tenants", "memories", "chunks"} & asyncio.run(table_names(url)))

    upgrade(url, "model-x", 8)  # and up again: the role and extension already exist
    assert asyncio.run(current_revision(url)) == head_revision()


def test_vector_column_takes_the_embedder_dimension(empty_database_url):
    url = empty_database_url
    upgrade(url, "model-y", 12)
    column, _, _ = asyncio.run(_embedding_type(url))
    assert column == "vector(12)"


def test_cli_admin_on_an_unmigrated_database_says_to_migrate(empty_database_url):
    assert asyncio.run(read_embedding_meta(empty_database_url)) == (None, None)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMIND_")}
    env["KNOWMIND_DATABASE_URL"] = empty_database_url
    ran = subprocess.run(
        [sys.executable, "-m", "knowmind", "tenant", "create", "acme"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode != 0 and "Traceback" not in ran.stderr
    assert "not migrated yet: run `knowmind migrate`" in ran.stdout + ran.stderr
    assert "tenants" not in asyncio.run(table_names(empty_database_url))


def test_another_embedder_is_refused(empty_database_url):
    url = empty_database_url
    upgrade(url, "model-z", 16)
    asyncio.run(check_embedding_model(url, "model-z", 16))
    with pytest.raises(SchemaError, match="created for embedder 'model-z'"):
        asyncio.run(check_embedding_model(url, "model-z", 32))
    with pytest.raises(SchemaError, match="configured embedder is 'other'"):
        upgrade(url, "other", 16)


async def _embedding_type(url: str) -> tuple[str, str, str]:
    """(chunks.embedding's type, its HNSW index's definition, the storage knowmind_meta records)"""
    [row] = await _rows(
        url,
        "SELECT (SELECT format_type(atttypid, atttypmod) FROM pg_attribute"
        "        WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'),"
        " (SELECT indexdef FROM pg_indexes WHERE indexname = 'chunks_embedding'),"
        " (SELECT value FROM knowmind_meta WHERE key = 'embedding_storage')",
    )
    return row


def test_large_embedders_get_halfvec_storage(empty_database_url):
    upgrade(empty_database_url, "model-large", 1024)
    column, index, stored = asyncio.run(_embedding_type(empty_database_url))
    assert (column, stored) == ("halfvec(1024)", "halfvec")
    assert "halfvec_cosine_ops" in index


def test_embedding_storage_can_be_chosen_at_creation(empty_database_url):
    upgrade(empty_database_url, "model-small", 8, embedding_storage="halfvec")
    column, _, stored = asyncio.run(_embedding_type(empty_database_url))
    assert (column, stored) == ("halfvec(8)", "halfvec")


def test_small_embedders_keep_full_precision(empty_database_url):
    upgrade(empty_database_url, "model-small", 384)
    column, index, stored = asyncio.run(_embedding_type(empty_database_url))
    assert (column, stored) == ("vector(384)", "vector")
    assert "vector_cosine_ops" in index


async def _bare_tenant(conn, name: str, dim: int):
    """A tenant inserted as the owner (no RLS to set up in the bare migrated schema)."""
    return await conn.scalar(
        text(
            "INSERT INTO tenants (name, embedding_model, embedding_dim) "
            "VALUES (:name, 'model-small', :dim) RETURNING id"
        ),
        {"name": name, "dim": dim},
    )


def _one_chunk_memory(content: str, language: str, vector, sha256: bytes):
    """A memory of one chunk (``content``) with its embedding, as ``insert_memories`` takes it."""
    from knowmind.store.memories import Draft, MemoryToInsert

    return MemoryToInsert(Draft(content=content), sha256, language, [content], vector[None, :])


async def _store_and_search_halfvec(url: str) -> tuple[list, list, str]:
    import numpy as np

    from knowmind.store.memories import insert_memories
    from knowmind.store.search import MemoryFilters
    from knowmind.store.vector_search import explain_vector_search, vector_candidates

    engine = make_engine(url, 1)
    vectors = np.eye(8, dtype=np.float32)
    async with engine.begin() as conn:
        tenant = await _bare_tenant(conn, "h", 8)
        items = [
            _one_chunk_memory(f"text {i}", "simple", vector, bytes([i]) * 32)
            for i, vector in enumerate(vectors)
        ]
        # all in one statement, as a batch writes them (the vectors cast to halfvec on insert);
        # no worker runs on this bare schema
        stored = await insert_memories(conn, tenant, items, job_kind="extract_mentions")
        assert [s.chunks if s else 0 for s in stored] == [1] * len(vectors)
        query = vectors[3] + 0.1 * vectors[5]
        found = {}
        for path in ("exact", "hnsw"):
            found[path] = await vector_candidates(
                conn, tenant, query, MemoryFilters(), 2, path=path
            )
        plan = await explain_vector_search(conn, tenant, query, MemoryFilters(), 2, "hnsw")
    await engine.dispose()
    return found["exact"], found["hnsw"], plan


async def _tenant_index_on_halfvec(url: str) -> tuple[str, list, list, str]:
    """The tenant's own index on the halfvec schema: its definition, and a search through it."""
    import numpy as np

    from knowmind.store.search import MemoryFilters
    from knowmind.store.tenant_index import build_tenant_index, tenant_index_name
    from knowmind.store.vector_search import explain_vector_search, vector_candidates

    engine = make_engine(url, 1)
    async with engine.connect() as conn:
        tenant = await conn.scalar(text("SELECT id FROM tenants WHERE name = 'h'"))
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        assert await build_tenant_index(conn, tenant)
        definition = await conn.scalar(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = :n"),
            {"n": tenant_index_name(tenant)},
        )
    query = np.eye(8, dtype=np.float32)[3] + 0.1 * np.eye(8, dtype=np.float32)[5]
    async with engine.begin() as conn:
        exact = await vector_candidates(conn, tenant, query, MemoryFilters(), 2, path="exact")
        own = await vector_candidates(conn, tenant, query, MemoryFilters(), 2, path="tenant-hnsw")
        plan = await explain_vector_search(conn, tenant, query, MemoryFilters(), 2, "tenant-hnsw")
    await engine.dispose()
    return str(definition), exact, own, plan


def test_halfvec_storage_is_searched_through_its_index(empty_database_url):
    upgrade(empty_database_url, "model-small", 8, embedding_storage="halfvec")
    exact, approximate, plan = asyncio.run(_store_and_search_halfvec(empty_database_url))
    assert [m for _, m, _ in exact] == [m for _, m, _ in approximate]
    assert exact[0][2] > 0.99 and exact[1][2] < exact[0][2]
    assert "Index Scan using chunks_embedding" in plan, plan
    definition, exact, own, plan = asyncio.run(_tenant_index_on_halfvec(empty_database_url))
    # a halfvec column: the index is on the column itself (no cast), as dense as any tenant's
    assert (
        "USING hnsw (embedding halfvec_cosine_ops) WITH (m='24', ef_construction='128') WHERE ("
        in (definition)
    )
    assert [m for _, m, _ in own] == [m for _, m, _ in exact]
    assert "Index Scan using chunks_embedding_t_" in plan, plan


async def _embedding_storage(url: str) -> dict[str, str]:
    rows = await _rows(
        url,
        "SELECT attrelid::regclass::text, attstorage::text FROM pg_attribute"
        " WHERE attname = 'embedding' AND attrelid IN ('chunks'::regclass,"
        " 'summary_nodes'::regclass)",
    )
    return {str(table): str(kind) for table, kind in rows}


async def _long_chunk_embedding_out_of_line(url: str, dim: int) -> bool:
    """Store one memory whose row passes the TOAST threshold (long text beside the vector);
    whether its embedding went to the TOAST relation."""
    import numpy as np

    from knowmind.store.memories import insert_memories

    content = " ".join(f"Satz {i} über Speicher und Vektoren." for i in range(60))
    vector = np.random.default_rng(7).standard_normal(dim).astype(np.float32)
    engine = make_engine(url, 1)
    async with engine.begin() as conn:
        tenant = await _bare_tenant(conn, "t", dim)
        item = _one_chunk_memory(content, "german", vector, b"\x01" * 32)
        await insert_memories(conn, tenant, [item], job_kind="extract_mentions")
        row_bytes, external = (
            await conn.execute(
                text(
                    "SELECT pg_column_size(c.*), pg_column_toast_chunk_id(embedding) IS NOT NULL"
                    " FROM chunks c WHERE tenant_id = :t"
                ),
                {"t": tenant},
            )
        ).one()
    await engine.dispose()
    assert row_bytes > 2032, "the row must pass the TOAST threshold for this test to mean much"
    return bool(external)


def test_small_embeddings_stay_in_their_rows(empty_database_url):
    upgrade(empty_database_url, "model-small", 384)
    assert asyncio.run(_embedding_storage(empty_database_url)) == {
        "chunks": "p",
        "summary_nodes": "p",
    }
    assert not asyncio.run(_long_chunk_embedding_out_of_line(empty_database_url, 384))
    downgrade(empty_database_url, "0014")  # back to pgvector's default: out of line again
    assert set(asyncio.run(_embedding_storage(empty_database_url)).values()) == {"e"}


@pytest.mark.parametrize(
    ("dim", "storage", "expected"), [(1024, "halfvec", "p"), (1536, "vector", "e")]
)
def test_only_embeddings_of_at_most_half_a_page_are_kept_inline(
    empty_database_url, dim, storage, expected
):
    upgrade(empty_database_url, "model-large", dim, embedding_storage=storage)
    assert asyncio.run(_embedding_storage(empty_database_url)) == {
        "chunks": expected,
        "summary_nodes": expected,
    }


async def _insert_two_memories(url: str) -> None:
    engine = make_engine(url, 1)
    async with engine.begin() as conn:
        tenant = (
            await conn.execute(
                text(
                    "INSERT INTO tenants (name, embedding_model, embedding_dim) "
                    "VALUES ('t', 'model-x', 8) RETURNING id"
                )
            )
        ).scalar_one()
        for n, content in enumerate(("We moved here last May.", "The kitchen is blue.")):
            await conn.execute(
                text(
                    "INSERT INTO memories (tenant_id, content, content_sha256) "
                    "VALUES (:tenant, :content, :sha)"
                ),
                {"tenant": tenant, "content": content, "sha": bytes([n]) * 32},
            )
    await engine.dispose()


def test_whether_a_memory_states_a_time_is_backfilled(empty_database_url):
    url = empty_database_url
    upgrade(url, "model-x", 8)
    downgrade(url, "0022")
    asyncio.run(_insert_two_memories(url))
    upgrade(url, "model-x", 8)
    rows = asyncio.run(_rows(url, "SELECT content, states_time FROM memories ORDER BY content"))
    assert rows == [("The kitchen is blue.", False), ("We moved here last May.", True)]


async def _insert_memories_with_chunks(url: str) -> None:
    """A tenant with a memory of a long chunk and one of a short chunk, written before migration
    0024, and a tenant without chunks."""
    engine = make_engine(url, 1)
    async with engine.begin() as conn:
        await _bare_tenant(conn, "empty", 8)
        tenant = await _bare_tenant(conn, "s", 8)
        texts = ("Wir zogen im Mai um. Die Küche ist seitdem blau gestrichen.", "Ja.")
        for n, content in enumerate(texts):
            memory = await conn.scalar(
                text(
                    "INSERT INTO memories (tenant_id, content, content_sha256) "
                    "VALUES (:tenant, :content, :sha) RETURNING id"
                ),
                {"tenant": tenant, "content": content, "sha": bytes([n]) * 32},
            )
            await conn.execute(
                text(
                    "INSERT INTO chunks (tenant_id, memory_id, ordinal, content, language, "
                    "embedding) VALUES (:tenant, :memory, 0, :content, 'german', "
                    "CAST('[1,0,0,0,0,0,0,0]' AS vector))"
                ),
                {"tenant": tenant, "memory": memory, "content": content},
            )
    await engine.dispose()


def test_the_tenants_before_sentence_vectors_get_a_job_to_make_them(empty_database_url):
    url = empty_database_url
    upgrade(url, "model-x", 8)
    downgrade(url, "0023")
    asyncio.run(_insert_memories_with_chunks(url))
    upgrade(url, "model-x", 8)
    jobs = asyncio.run(
        _rows(
            url,
            "SELECT t.name, j.kind, j.payload::text, j.status FROM jobs j "
            "JOIN tenants t ON t.id = j.tenant_id",
        )
    )
    assert jobs == [("s", "embed_sentences", "{}", "pending")]  # one for the tenant with chunks
