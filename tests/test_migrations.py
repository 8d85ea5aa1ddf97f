"""Migrations from an empty database to head and back, and the embedder guard."""

from __future__ import annotations

import asyncio
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
    engine = make_engine(url, 1)
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        )
        names = set(rows.scalars())
    await engine.dispose()
    return names


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

    async def column_type() -> str:
        engine = make_engine(url, 1)
        async with engine.connect() as conn:
            value = await conn.scalar(
                text(
                    "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                    "WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
                )
            )
        await engine.dispose()
        return value

    assert asyncio.run(column_type()) == "vector(12)"


def test_another_embedder_is_refused(empty_database_url):
    url = empty_database_url
    upgrade(url, "model-z", 16)
    asyncio.run(check_embedding_model(url, "model-z", 16))
    with pytest.raises(SchemaError, match="created for embedder 'model-z'"):
        asyncio.run(check_embedding_model(url, "model-z", 32))
    with pytest.raises(SchemaError, match="configured embedder is 'other'"):
        upgrade(url, "other", 16)
