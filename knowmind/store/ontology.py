"""A tenant's extensions of the relation catalogue."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.scalars import dict_rows

__all__ = ["insert_classes", "insert_predicate", "load_extensions"]


async def load_extensions(
    conn: AsyncConnection, tenant_id: UUID
) -> tuple[list[tuple[str, str | None]], list[dict[str, Any]]]:
    classes = await conn.execute(
        text("SELECT name, description FROM ontology_classes WHERE tenant_id = :t"),
        {"t": tenant_id},
    )
    predicates = await dict_rows(
        conn,
        text(
            "SELECT name, subject_classes, object_classes, inverse, is_symmetric AS symmetric, "
            "description, single_valued "
            "FROM ontology_predicates WHERE tenant_id = :t ORDER BY name"
        ),
        {"t": tenant_id},
    )
    return [tuple(r) for r in classes], predicates


async def insert_classes(conn: AsyncConnection, tenant_id: UUID, names: list[str]) -> None:
    if names:
        await conn.execute(
            text(
                "INSERT INTO ontology_classes (tenant_id, name) "
                "SELECT :t, unnest(CAST(:names AS text[])) ON CONFLICT DO NOTHING"
            ),
            {"t": tenant_id, "names": names},
        )


async def insert_predicate(
    conn: AsyncConnection,
    tenant_id: UUID,
    *,
    name: str,
    subject_classes: list[str],
    object_classes: list[str],
    inverse: str | None,
    symmetric: bool,
    description: str | None,
    single_valued: bool = False,
) -> bool:
    """False when the tenant already has a predicate of that name."""
    inserted = await conn.scalar(
        text(
            "INSERT INTO ontology_predicates (tenant_id, name, subject_classes, object_classes, "
            "inverse, is_symmetric, description, single_valued) "
            "VALUES (:t, :n, :s, :o, :i, :sym, :d, :sv) "
            "ON CONFLICT DO NOTHING RETURNING name"
        ),
        {
            "t": tenant_id,
            "n": name,
            "s": subject_classes,
            "o": object_classes,
            "i": inverse,
            "sym": symmetric,
            "d": description,
            "sv": single_valued,
        },
    )
    return inserted is not None
