"""What the command groups share: the database (the configured one or the embedded server),
the schema, the admin service, and the ``--url``/``--token`` options of the commands that talk
to a running server."""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, TypeAlias, TypeVar

from knowmind.db.embedded import EmbeddedPostgres
from knowmind.db.engine import Database
from knowmind.db.migrate import SchemaError, read_embedding_meta, upgrade
from knowmind.models.base import Embedder
from knowmind.services.admin import AdminService
from knowmind.settings import Settings

__all__ = [
    "TENANT_HELP",
    "Subparsers",
    "add_server_options",
    "command_group",
    "database",
    "database_and_server",
    "migrate_schema",
    "migrated_db",
    "on_admin",
    "on_database",
]

T = TypeVar("T")
# where a command group adds its commands (argparse's class is generic to type checkers only)
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
TENANT_HELP = "tenant id or name"


@contextmanager
def database(settings: Settings) -> Iterator[Settings]:
    """Settings with a database URL: the configured one, or the embedded server's."""
    with database_and_server(settings) as (with_url, _):
        yield with_url


@contextmanager
def database_and_server(
    settings: Settings,
) -> Iterator[tuple[Settings, EmbeddedPostgres | None]]:
    """``database``, and the embedded server when there is one (the server supervises it).
    Beside a running ``knowmind serve`` of the same data dir the command uses its server."""
    if settings.database.database_url:
        yield settings, None
        return
    server = EmbeddedPostgres(settings.server.embedded_pgdata)
    url = server.start()
    try:
        yield settings.with_overrides(database_url=url), server
    finally:
        server.stop()


def on_database(settings: Settings, work: Callable[[Settings], Coroutine[Any, Any, T]]) -> T:
    """``work`` run to its end on the database (``database``): the settings it gets carry
    the URL."""
    with database(settings) as with_url:
        return asyncio.run(work(with_url))


def migrate_schema(settings: Settings, embedder: Embedder) -> None:
    """Schema to head, recording (or checking) the embedder's model and dimension."""
    assert settings.database.database_url
    upgrade(
        settings.database.database_url,
        embedder.model_id,
        embedder.dim,
        embedding_storage=settings.database.embedding_storage,
    )


async def migrated_db(settings: Settings) -> tuple[Database, str, int]:
    """Pools on a migrated database, and the embedder (model, dimension) it was created for."""
    assert settings.database.database_url
    model, dim = await read_embedding_meta(settings.database.database_url)
    if model is None or dim is None:
        raise SchemaError("the database is not migrated yet: run `knowmind migrate`")
    db = Database.connect(
        settings.database.database_url,
        settings.database.app_database_url,
        2,
        graph_mirror=bool(settings.graph.neo4j_url),  # as the server: no mirror, no outbox rows
        tenant_scope=settings.database.tenant_scope,
    )
    return db, model, dim


def on_admin(settings: Settings, work: Callable[[AdminService], Coroutine[Any, Any, T]]) -> T:
    """``work`` with the admin service on the migrated database (``on_database``)."""

    async def run(with_url: Settings) -> T:
        db, model, dim = await migrated_db(with_url)
        try:
            return await work(AdminService(db, model, dim))
        finally:
            await db.dispose()

    return on_database(settings, run)


def command_group(sub: Subparsers, name: str, description: str) -> Subparsers:
    """``knowmind NAME ACTION …``: a command whose actions are its own subcommands (an action
    is required)."""
    return sub.add_parser(name, help=description).add_subparsers(dest="action", required=True)


def add_server_options(
    parser: argparse.ArgumentParser, token_variable: str, token_help: str, url_help: str
) -> None:
    """``--url`` (or ``KNOWMIND_URL``) and ``--token`` (or ``token_variable``)."""
    parser.add_argument("--url", default=os.environ.get("KNOWMIND_URL"), help=url_help)
    parser.add_argument("--token", default=os.environ.get(token_variable), help=token_help)
