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
    url = settings.database.database_url
    if not url:
        raise SystemExit("set KNOWMIND_DATABASE_URL, or run `knowmind migrate` (embedded server)")
    embedder = build_embedder(settings.models.embedder, threads=1)
    config.attributes.setdefault("database_url", url)
    config.attributes.setdefault("embedding_model", embedder.model_id)
    config.attributes.setdefault("embedding_dim", embedder.dim)


# Replicas that start together (several `knowmind serve`, a migration Job) migrate one at a
# time: a session lock held across the migrations' own transactions; the later ones find the
# schema at head and do nothing.
MIGRATION_LOCK = 0x6B6E6D6967  # "knmig"


def _run(connection: Connection) -> None:
    connection.exec_driver_sql(f"SELECT pg_advisory_lock({MIGRATION_LOCK})")
    connection.commit()  # the session lock outlives this transaction
    try:
        context.configure(
            connection=connection, target_metadata=None, transaction_per_migration=True
        )
        with context.begin_transaction():
            context.run_migrations()
        connection.commit()
    finally:
        connection.exec_driver_sql(f"SELECT pg_advisory_unlock({MIGRATION_LOCK})")
        connection.commit()


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
