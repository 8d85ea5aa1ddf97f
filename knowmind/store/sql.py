"""Read statements run on the asyncpg connection itself.

The recall path runs a few dozen small statements per question; through SQLAlchemy each costs
about three times the driver's own CPU (statement compilation, result rows, the greenlet
switch). Read statements are therefore written with ``:name`` parameters, as everywhere in
``store/``, converted once to asyncpg's ``$n`` form and run on the driver connection: a raw
``asyncpg.Connection`` (``Database.read``) or, for callers inside a SQLAlchemy transaction,
the connection under it (same transaction).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from functools import lru_cache
from typing import Any, TypeAlias

import asyncpg  # type: ignore[import-untyped]
import numpy as np
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "FORCE_CUSTOM_PLANS",
    "Conn",
    "Record",
    "driver",
    "fetch",
    "fetchrow",
    "one_transaction",
    "positional",
    "vector_text",
]

Conn: TypeAlias = AsyncConnection | asyncpg.Connection
Record: TypeAlias = asyncpg.Record

# A transaction-local setting: plan the transaction's statements for their values.
FORCE_CUSTOM_PLANS = "SET LOCAL plan_cache_mode = force_custom_plan"
# ``:name`` but not the second colon of a ``::type`` cast nor a colon inside a word
_PARAMETER = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")


@lru_cache(maxsize=512)
def positional(sql: str) -> tuple[str, tuple[str, ...]]:
    """``sql`` with each ``:name`` replaced by ``$n`` (a name used twice keeps its number) and
    the names in parameter order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return _PARAMETER.sub(number, sql), tuple(names)


async def driver(conn: Conn) -> asyncpg.Connection:
    """The asyncpg connection itself (under a SQLAlchemy connection: its driver connection,
    in the same transaction)."""
    if isinstance(conn, AsyncConnection):
        raw = await conn.get_raw_connection()
        driver_connection: asyncpg.Connection = raw.driver_connection
        return driver_connection
    return conn


@asynccontextmanager
async def one_transaction(conn: Conn, settings: str = "") -> AsyncIterator[asyncpg.Connection]:
    """The driver connection inside a transaction, for statements that must share one (a
    transaction-local setting, then the query it is for): the caller's, or a new one.
    ``settings``: ``SET LOCAL`` statements (trusted text, no parameters), sent with the BEGIN
    in one round trip."""
    raw = await driver(conn)
    if raw.is_in_transaction():
        if settings:
            await raw.execute(settings)
        yield raw
        return
    try:
        await raw.execute(f"BEGIN; {settings}" if settings else "BEGIN")
        yield raw
    except BaseException:
        # after a cancelled statement the connection may still be busy: the pool's reset
        # then rolls back once the cancellation is through
        with suppress(Exception):
            await raw.execute("ROLLBACK")
        raise
    await raw.execute("COMMIT")


def _arguments(names: Sequence[str], params: Mapping[str, Any]) -> list[Any]:
    missing = [name for name in names if name not in params]
    if missing:
        raise KeyError(f"statement parameters not given: {', '.join(missing)}")
    return [params[name] for name in names]


async def fetch(
    conn: Conn, sql: str, params: Mapping[str, Any], *, replan: bool = False
) -> list[Record]:
    """The rows of ``sql`` (``:name`` parameters from ``params``; extra keys are ignored).

    ``replan``: plan for these parameter values, never a cached generic plan (a statement
    whose best plan depends on the tenant's size, e.g. an index walk for a large tenant and a
    sort for a small one): on a session that plans every statement anyway (``Database.read(…,
    custom_plans=True)``) as it is, elsewhere in a transaction of its own (or the caller's)
    that forces custom plans. (Preparing the statement afresh instead cost more: parsing it
    again.)"""
    query, names = positional(sql)
    raw = await driver(conn)
    arguments = _arguments(names, params)
    if replan and not getattr(raw, "custom_plans", False):
        async with one_transaction(raw, FORCE_CUSTOM_PLANS) as tx:
            custom: list[Record] = await tx.fetch(query, *arguments)
        return custom
    rows: list[Record] = await raw.fetch(query, *arguments)
    return rows


async def fetchrow(
    conn: Conn, sql: str, params: Mapping[str, Any], *, replan: bool = False
) -> Record:
    """The one row of ``sql``, a statement that always returns exactly one (as ``fetch``)."""
    rows = await fetch(conn, sql, params, replan=replan)
    if not rows:
        raise LookupError("the statement returned no row")
    return rows[0]


@lru_cache(maxsize=8)
def _vector_format(dim: int) -> str:
    return "[" + ",".join(["%.9g"] * dim) + "]"


def vector_text(embedding: np.ndarray) -> str:
    """pgvector's text form of a vector (parsed by ``vector`` and ``halfvec`` alike). Nine
    significant digits give every float32 back exactly, and one C-level format call writes
    them three times faster than the shortest form per value (≈ 0.5 ms for 384 values)."""
    values = np.asarray(embedding, dtype=np.float32).tolist()
    return _vector_format(len(values)) % tuple(values)
