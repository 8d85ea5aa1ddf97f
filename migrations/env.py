"""Alembic environment (async). ``knowmind migrate`` passes the URL and embedder as attributes;
the plain ``alembic`` command falls back to the ``KNOWMIND_*`` settings."""

from __future__ import annotations

import asyncio

import pgvector.sqlalchemy  # noqa: F401  (registers the vector types for autogenerate)
from alembic import context
from sqlalchemy.engine import Connection

from knowmind.db.engine import make_engine

config = context.config


def _attributes_from_settings() -> None:
    from knowmind.models.factory import build_embedder
    from knowmind.settings import Settings

    settings = Settings.from_env()
    if not settings.database_url:
        raise SystemExit("set KNOWMIND_DATABASE_URL, or run `knowmind migrate` (embedded server)")
    embedder = build_embedder(settings.embedder, threads=1)
    config.attributes.setdefault("database_url", settings.database_url)
    config.attributes.setdefault("embedding_model", embedder.model_id)
    config.attributes.setdefault("embedding_dim", embedder.dim)


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=None, transaction_per_migration=True)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = make_engine(config.attributes["database_url"], 1)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
            await connection.commit()
    finally:
        await engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline (--sql) migrations are not supported")
if "database_url" not in config.attributes:
    _attributes_from_settings()
asyncio.run(_run_async())
