"""Typed values read back from a statement: single values (``RETURNING id``, ``SELECT
status``) and rows as dicts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from sqlalchemy import Executable
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["dict_rows", "maybe_id", "one_id", "one_str"]


async def maybe_id(
    conn: AsyncConnection, statement: Executable, params: Mapping[str, Any]
) -> UUID | None:
    """The first column of the first row as a UUID; None when there is no row."""
    value = await conn.scalar(statement, params)
    if value is None or isinstance(value, UUID):
        return value
    raise TypeError(f"expected a uuid column, got {type(value).__name__}")


async def one_id(conn: AsyncConnection, statement: Executable, params: Mapping[str, Any]) -> UUID:
    """Like :func:`maybe_id` for a statement that always yields a row."""
    value = await maybe_id(conn, statement, params)
    if value is None:
        raise LookupError("the statement returned no row")
    return value


async def one_str(conn: AsyncConnection, statement: Executable, params: Mapping[str, Any]) -> str:
    """The first column of the first row as text (a statement that always yields a row)."""
    value = await conn.scalar(statement, params)
    if isinstance(value, str):
        return value
    raise TypeError(f"expected a text column, got {type(value).__name__}")


async def dict_rows(
    conn: AsyncConnection, statement: Executable, params: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Every row as a dict of its columns."""
    return [dict(row._mapping) for row in await conn.execute(statement, params)]
