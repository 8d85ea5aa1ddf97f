"""The recall read path's connections: raw asyncpg sessions, read-only, scoped to one tenant at
a time (see ``store.sql`` for the statements run on them)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any, Literal
from uuid import UUID

import asyncpg  # type: ignore[import-untyped]
from sqlalchemy.engine import make_url

from knowmind.db.tenant_scope import set_tenant_sql, set_user_sql, user_of

__all__ = ["NEAREST_SESSION", "ReadPool", "ReaderConnection"]

# The sessions the vector stage walks HNSW indexes on (``ReadPool.tenant(…, nearest=True)``).
# Its statement then needs no transaction of its own for them (``store.vector_search`` sets the
# same per transaction elsewhere).
NEAREST_SESSION = {
    "plan_cache_mode": "force_custom_plan",  # planned for its values: a partial index needs it
    "hnsw.iterative_scan": "relaxed_order",  # a filtered walk goes on until it has k rows
    "enable_sort": "off",  # an index walk, not a sort of every distance
    "enable_seqscan": "off",  # nor a table scan
}


class ReaderConnection(asyncpg.Connection):  # type: ignore[misc]
    """A read-pool connection that remembers which tenant its session is scoped to, whether
    the session plans every statement for its values (``custom_plans``), whether it has the
    ``NEAREST_SESSION`` settings (``nearest``) and the ``hnsw.ef_search`` it last set."""

    __slots__ = ("_ef_search", "_tenant", "custom_plans", "nearest")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tenant: str | None = None
        self._ef_search: int | None = None
        self.custom_plans = False
        self.nearest = False

    async def scope_to(self, tenant_id: UUID) -> None:
        """Scope the session to the tenant (row-level security reads ``app.tenant_id``) and to
        its end user, or to none (``app.user_id``, see ``db.tenant_scope.UserScope``); a round
        trip only when the last use was for another tenant or user. Called outside any
        transaction, so no rollback can undo it behind the cache's back."""
        user = user_of(tenant_id) or ""
        tenant = f"{tenant_id}/{user}"
        if self._tenant == tenant:
            return
        self._tenant = None
        await self.execute(
            "SELECT set_config('app.tenant_id', $1, false), set_config('app.user_id', $2, false)",
            str(tenant_id),
            user,
        )
        self._tenant = tenant

    async def use_ef_search(self, ef_search: int) -> None:
        """Set the session's ``hnsw.ef_search``; a round trip only when it changes. Outside
        any transaction only (a rollback would undo it behind the cache's back)."""
        if self.is_in_transaction():
            raise RuntimeError("use_ef_search inside a transaction")
        if self._ef_search == ef_search:
            return
        self._ef_search = None
        await self.execute(f"SET hnsw.ef_search = {int(ef_search)}")
        self._ef_search = ef_search


async def _keep_session(_conn: asyncpg.Connection) -> None:
    """Pool reset: nothing beyond asyncpg's own (an open transaction is rolled back). The
    session keeps its tenant and no RESET ALL round trip is spent on every release."""


Profile = Literal["auto", "custom", "nearest"]
_PROFILE_SETTINGS: dict[Profile, dict[str, str]] = {
    "auto": {"plan_cache_mode": "auto"},
    "custom": {"plan_cache_mode": "force_custom_plan"},
    "nearest": NEAREST_SESSION,
}


def _marked(profile: Profile) -> Callable[[ReaderConnection], Coroutine[Any, Any, None]]:
    async def init(conn: ReaderConnection) -> None:
        conn.custom_plans = profile != "auto"
        conn.nearest = profile == "nearest"

    return init


class ReadPool:
    """Pools of read sessions: plans chosen by PostgreSQL (``plan_cache_mode`` auto: a
    statement whose plan does not depend on the tenant keeps a generic plan once it is as cheap,
    which saves planning it on every recall) and plans made for every execution (for the
    statements ``store.sql.fetch(replan=True)`` marks: BM25 scoring, trigram look-ups, the
    graph's bounded link reads — on these sessions they need no transaction of their own), and
    the vector stage's (``NEAREST_SESSION``).

    Every session is read-only (``default_transaction_read_only``) and scoped to one tenant at a
    time: the tenant is set on the session when a connection is taken for another tenant than
    its last one, so a recall's statements spend no BEGIN/set_config/COMMIT round trips;
    statements run on their own (autocommit) unless the caller opens a transaction. With
    ``per_transaction`` (``KNOWMIND_TENANT_SCOPE=transaction``, for Citus, which forwards only
    ``SET LOCAL``) each use is one read-only transaction that sets the tenant locally. No pre-ping
    (asyncpg notices a closed socket itself and reconnects on the next acquire), no reset
    query."""

    def __init__(
        self, url: str, size: int, settings: dict[str, str], per_transaction: bool = False
    ) -> None:
        self._per_transaction = per_transaction
        self._dsn = make_url(url).set(drivername="postgresql").render_as_string(False)
        self._size = size
        self._settings = {**settings, "default_transaction_read_only": "on"}
        self._pools: dict[Profile, asyncpg.Pool] = {}
        self._opening = asyncio.Lock()

    async def _pool(self, profile: Profile) -> asyncpg.Pool:
        if profile not in self._pools:
            async with self._opening:
                if profile not in self._pools:
                    self._pools[profile] = await asyncpg.create_pool(
                        self._dsn,
                        min_size=0,
                        max_size=self._size,
                        reset=_keep_session,
                        init=_marked(profile),
                        server_settings={**self._settings, **_PROFILE_SETTINGS[profile]},
                        connection_class=ReaderConnection,
                    )
        return self._pools[profile]

    @asynccontextmanager
    async def tenant(
        self, tenant_id: UUID, *, custom_plans: bool = False, nearest: bool = False
    ) -> AsyncIterator[ReaderConnection]:
        """``nearest``: a ``NEAREST_SESSION`` session (for the vector stage's HNSW walk)."""
        profile: Profile = "nearest" if nearest else "custom" if custom_plans else "auto"
        pool = await self._pool(profile)
        async with pool.acquire() as conn:
            if not self._per_transaction:
                await conn.scope_to(tenant_id)
                yield conn
                return
            # KNOWMIND_TENANT_SCOPE=transaction (Citus): the tenant lives as long as this
            # transaction, and store.sql's own transactions nest in it as savepoints
            async with conn.transaction(readonly=True):
                await conn.execute(set_tenant_sql(tenant_id))
                await conn.execute(set_user_sql(user_of(tenant_id)))
                yield conn

    async def expire_connections(self) -> None:
        """Replace every session at its next use (after the server restarted under them)."""
        for pool in list(self._pools.values()):
            await pool.expire_connections()

    async def close(self) -> None:
        pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            await pool.close()
