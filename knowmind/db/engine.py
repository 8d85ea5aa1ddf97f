"""Connection pools: the owner (migrations, admin plane) and the row-level-security app role."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any
from uuid import UUID

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy import event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from knowmind.db.reader import ReadPool
from knowmind.db.tenant_scope import set_tenant_sql, set_user_sql, user_of

__all__ = [
    "APP_ROLE",
    "Database",
    "app_url_for",
    "normalise_url",
    "take_tenant_write_lock",
    "tenant_write_lock_key",
]

APP_ROLE = "knowmind_app"

# Prepared statements are not re-planned after SET of planner settings (hnsw.*) unless forced.
SERVER_SETTINGS = {"plan_cache_mode": "force_custom_plan", "application_name": "knowmind"}


def normalise_url(url: str) -> str:
    """Accept plain ``postgresql://`` URLs and point them at the asyncpg driver."""
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres", "postgresql+psycopg", "postgresql+psycopg2"}:
        parsed = parsed.set(drivername="postgresql+asyncpg")
    return parsed.render_as_string(hide_password=False)


def app_url_for(owner_url: str) -> str:
    """Default URL of the app role: the owner's URL with the user swapped and no password."""
    parsed = make_url(normalise_url(owner_url)).set(username=APP_ROLE, password=None)
    return parsed.render_as_string(hide_password=False)


# A pooled connection idle for longer than this is pinged before it is handed out; a busy one
# is not (SQLAlchemy's pre-ping costs three round trips on asyncpg, BEGIN / ";" / ROLLBACK, on
# every checkout: a third of a one-chunk write's round trips). A connection that died while in
# use fails its statement; SQLAlchemy then invalidates the whole pool, so the next checkouts
# reconnect, and the request gets the 503 "database unavailable; retry shortly".
PING_WHEN_IDLE_S = 2.0


def _ping_when_idle(engine: AsyncEngine) -> None:
    pool_events = engine.sync_engine.pool

    @event.listens_for(pool_events, "connect")
    @event.listens_for(pool_events, "checkin")
    def _idle_from_now(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info["idle_since"] = time.monotonic()

    @event.listens_for(pool_events, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        if time.monotonic() - record.info.get("idle_since", 0.0) <= PING_WHEN_IDLE_S:
            return
        try:
            dbapi_connection.ping()
        except Exception as exc:  # the pool drops this connection and checks out another
            raise DisconnectionError("pooled connection is gone") from exc


# Citus forwards SET LOCAL of the tenant to its workers only with this (a placeholder elsewhere).
CITUS_SETTINGS = {"citus.propagate_set_commands": "local"}


def _session_settings(graph_mirror: bool, tenant_scope: str = "session") -> dict[str, str]:
    # Without a mirror the outbox triggers write nothing (they read knowmind.graph_mirror).
    settings = {**SERVER_SETTINGS, "knowmind.graph_mirror": "on" if graph_mirror else "off"}
    return settings | (CITUS_SETTINGS if tenant_scope == "transaction" else {})


def make_engine(
    url: str, pool_size: int, graph_mirror: bool = True, tenant_scope: str = "session"
) -> AsyncEngine:
    settings = _session_settings(graph_mirror, tenant_scope)
    engine = create_async_engine(
        normalise_url(url),
        # A failing statement's parameters (memory content, query text) must never reach a log.
        hide_parameters=True,
        pool_size=pool_size,
        # recalls read through the raw read pools (db/reader.py): writes and the admin plane
        # need fewer connections on demand
        max_overflow=pool_size // 2,
        # the connection returned last is handed out next: under light load one connection
        # stays warm (and needs no idle ping) while the others rest
        pool_use_lifo=True,
        connect_args={"server_settings": settings},
    )
    _ping_when_idle(engine)
    return engine


def tenant_write_lock_key(tenant_id: UUID) -> str:
    """The advisory lock that serialises a tenant's memory and graph writes (re-entrant)."""
    return f"knowmind-graph:{tenant_id}"


async def scope_transaction(conn: AsyncConnection, tenant_id: UUID, *, write: bool) -> None:
    """Scope the open transaction to one tenant (row-level security reads ``app.tenant_id``),
    and to its end user when ``tenant_id`` is a ``UserScope`` (``app.user_id``); for a
    ``write``, take the tenant's write lock first (see ``Database.tenant_tx``)."""
    await conn.execute(text(set_tenant_sql(tenant_id)))
    user = user_of(tenant_id)
    if user is not None:
        await conn.execute(text(set_user_sql(user)))
    if write:
        await take_tenant_write_lock(conn, tenant_id)


async def take_tenant_write_lock(conn: AsyncConnection, tenant_id: UUID) -> None:
    """The tenant's write lock, held until the transaction ends."""
    await conn.execute(
        text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))"),
        {"key": tenant_write_lock_key(tenant_id)},
    )


@dataclass(slots=True)
class Database:
    """Both pools. Request handling only ever touches ``app`` inside a tenant transaction."""

    owner: AsyncEngine
    app: AsyncEngine
    reader: ReadPool

    @classmethod
    def connect(
        cls,
        owner_url: str,
        app_url: str | None,
        pool_size: int,
        graph_mirror: bool = True,
        tenant_scope: str = "session",
    ) -> Database:
        """``tenant_scope``: ``session`` or ``transaction`` (``KNOWMIND_TENANT_SCOPE``)."""
        return cls(
            owner=make_engine(owner_url, max(2, pool_size // 4), graph_mirror, tenant_scope),
            app=make_engine(
                app_url or app_url_for(owner_url), pool_size, graph_mirror, tenant_scope
            ),
            reader=ReadPool(
                normalise_url(app_url or app_url_for(owner_url)),
                pool_size,
                _session_settings(graph_mirror, tenant_scope),
                per_transaction=tenant_scope == "transaction",
            ),
        )

    @asynccontextmanager
    async def tenant_tx(
        self, tenant_id: UUID, *, write: bool = False
    ) -> AsyncIterator[AsyncConnection]:
        """A transaction as the app role, scoped by row-level security to one tenant.

        ``write``: the transaction changes memories or chunks. It first takes the tenant's write
        lock, so every such transaction locks in one order (tenant, then memory rows, then the
        tenant's BM25 statistics) and two of them can never deadlock.
        """
        async with self.app.begin() as conn:
            await scope_transaction(conn, tenant_id, write=write)
            yield conn

    @asynccontextmanager
    async def tenant_snapshot(self, tenant_id: UUID) -> AsyncIterator[AsyncConnection]:
        """A read-only REPEATABLE READ transaction as the app role, scoped to one tenant: every
        statement in it sees the same snapshot (a consistent export)."""
        async with self.app.connect() as conn:
            conn = await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin():
                await conn.execute(text("SET TRANSACTION READ ONLY"))
                await scope_transaction(conn, tenant_id, write=False)
                yield conn

    @asynccontextmanager
    async def read(
        self, tenant_id: UUID, *, custom_plans: bool = False, nearest: bool = False
    ) -> AsyncIterator[asyncpg.Connection]:
        """A read-only session as the app role, scoped by row-level security to one tenant, on
        a raw asyncpg connection (the recall path: ``store.sql`` statements only). Statements
        run on their own (``store.sql.one_transaction`` groups some). ``custom_plans``: a
        session that plans every statement for its values (for statements whose best plan
        depends on the tenant's size); the default keeps generic plans where they are as
        cheap. ``nearest``: a session set up for HNSW walks (``db.reader.NEAREST_SESSION``)."""
        async with self.reader.tenant(
            tenant_id, custom_plans=custom_plans, nearest=nearest
        ) as conn:
            yield conn

    @asynccontextmanager
    async def app_tx(self) -> AsyncIterator[AsyncConnection]:
        """A transaction as the app role with no tenant set (authentication only)."""
        async with self.app.begin() as conn:
            yield conn

    @asynccontextmanager
    async def owner_tx(self) -> AsyncIterator[AsyncConnection]:
        """A transaction as the schema owner: admin plane (tenants, tokens) and migrations."""
        async with self.owner.begin() as conn:
            yield conn

    @asynccontextmanager
    async def owner_autocommit(self) -> AsyncIterator[AsyncConnection]:
        """An owner connection outside any transaction, for statements that refuse one
        (``CREATE INDEX CONCURRENTLY``); each statement commits on its own."""
        async with self.owner.connect() as conn:
            yield await conn.execution_options(isolation_level="AUTOCOMMIT")

    async def reset_connections(self) -> None:
        """Drop pooled connections (they died with a restarted server); new ones are opened
        on demand."""
        await self.reader.expire_connections()
        await self.app.dispose()
        await self.owner.dispose()

    async def dispose(self) -> None:
        await self.reader.close()
        await self.app.dispose()
        await self.owner.dispose()
