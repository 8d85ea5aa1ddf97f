"""Run alembic migrations programmatically and check the database can host knowmind."""

from __future__ import annotations

import asyncio
from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.db.engine import make_engine, normalise_url

__all__ = [
    "SchemaError",
    "check_embedding_model",
    "current_revision",
    "head_revision",
    "known_revision",
    "read_embedding_meta",
    "revision_of",
    "schema_meta",
    "upgrade",
]


class SchemaError(RuntimeError):
    """The database cannot be used as it is (missing extension, other embedding model, ...)."""


def migrations_dir() -> Path:
    package = Path(__file__).resolve().parent.parent
    for candidate in (package.parent / "migrations", package / "_migrations"):
        if (candidate / "env.py").exists():
            return candidate
    raise SchemaError("knowmind migrations not found next to the package")


def alembic_config(
    url: str, embedding_model: str, embedding_dim: int, embedding_storage: str = "auto"
) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.attributes["database_url"] = normalise_url(url)
    cfg.attributes["embedding_model"] = embedding_model
    cfg.attributes["embedding_dim"] = embedding_dim
    cfg.attributes["embedding_storage"] = embedding_storage
    return cfg


@cache
def _scripts() -> ScriptDirectory:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    return ScriptDirectory.from_config(cfg)


def head_revision() -> str:
    head = _scripts().get_current_head()
    assert head is not None
    return head


def known_revision(revision: str) -> bool:
    """Whether this code's migrations include ``revision`` (a schema it can read)."""
    try:
        return _scripts().get_revision(revision) is not None
    except CommandError:
        return False


async def revision_of(conn: AsyncConnection) -> str | None:
    return await conn.run_sync(lambda sync: MigrationContext.configure(sync).get_current_revision())


async def current_revision(url: str) -> str | None:
    engine = make_engine(url, 1)
    try:
        async with engine.connect() as conn:
            return await revision_of(conn)
    finally:
        await engine.dispose()


async def ensure_vector_available(url: str) -> None:
    engine = make_engine(url, 1)
    try:
        async with engine.connect() as conn:
            found = await conn.scalar(
                text("SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'")
            )
    finally:
        await engine.dispose()
    if not found:
        raise SchemaError(
            "the PostgreSQL server has no 'vector' extension (pgvector) installed; "
            "install pgvector >= 0.8 on that server or unset KNOWMIND_DATABASE_URL "
            "to use the embedded PostgreSQL"
        )


async def schema_meta(conn: AsyncConnection) -> dict[str, str]:
    """``knowmind_meta``: the embedder the schema was created for (``embedding_model``,
    ``embedding_dim``, ``embedding_storage``)."""
    rows = await conn.execute(text("SELECT key, value FROM knowmind_meta"))
    return {str(key): str(value) for key, value in rows}


async def read_embedding_meta(url: str) -> tuple[str | None, int | None]:
    """(model id, dimension) the schema was created for; (None, None) before any migration."""
    engine = make_engine(url, 1)
    try:
        async with engine.connect() as conn:
            found = await conn.scalar(text("SELECT to_regclass('knowmind_meta')"))
            meta = await schema_meta(conn) if found is not None else {}
    finally:
        await engine.dispose()
    dim = meta.get("embedding_dim")
    return meta.get("embedding_model"), int(dim) if dim else None


async def check_embedding_model(url: str, model_id: str, dim: int) -> None:
    """Refuse to run with an embedder other than the one the schema was created for."""
    stored_model, stored_dim = await read_embedding_meta(url)
    if (stored_model, stored_dim) != (model_id, dim):
        raise SchemaError(
            f"this database was created for embedder {stored_model!r} ({stored_dim} dimensions) "
            f"but the configured embedder is {model_id!r} ({dim} dimensions); "
            "set KNOWMIND_EMBEDDER back to the original model (re-embedding is not supported yet)"
        )


def upgrade(
    url: str,
    embedding_model: str,
    embedding_dim: int,
    revision: str = "head",
    embedding_storage: str = "auto",
) -> None:
    """Migrate to ``revision``. Must be called outside a running event loop.
    ``embedding_storage`` (``auto``: halfvec from 1024 dimensions, else vector) only matters
    when the schema is created."""
    asyncio.run(ensure_vector_available(url))
    config = alembic_config(url, embedding_model, embedding_dim, embedding_storage)
    command.upgrade(config, revision)
    asyncio.run(check_embedding_model(url, embedding_model, embedding_dim))


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url, "", 0), revision)
