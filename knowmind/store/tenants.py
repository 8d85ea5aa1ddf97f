"""tenants (admin plane: called on the owner connection)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import bindparam, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.rows import TenantRow

__all__ = [
    "DuplicateTenantError",
    "create_tenant",
    "get_tenant",
    "get_tenant_by_name",
    "language_exists",
    "list_tenants",
    "tenant_exists",
    "tenant_language",
    "tenant_settings",
    "update_tenant_settings",
]

_COLUMNS = "id, name, language::text AS language, embedding_model, embedding_dim, created_at"


class DuplicateTenantError(ValueError):
    pass


async def language_exists(conn: AsyncConnection, language: str) -> bool:
    found = await conn.scalar(
        text("SELECT EXISTS (SELECT 1 FROM pg_ts_config WHERE cfgname = :language)"),
        {"language": language},
    )
    return bool(found)


async def create_tenant(
    conn: AsyncConnection, name: str, language: str, embedding_model: str, embedding_dim: int
) -> TenantRow:
    try:
        async with conn.begin_nested():
            row = (
                await conn.execute(
                    text(
                        "INSERT INTO tenants (name, language, embedding_model, embedding_dim) "
                        "VALUES (:name, CAST(:language AS regconfig), :model, :dim) "
                        f"RETURNING {_COLUMNS}"
                    ),
                    {
                        "name": name,
                        "language": language,
                        "model": embedding_model,
                        "dim": embedding_dim,
                    },
                )
            ).one()
    except IntegrityError as exc:
        raise DuplicateTenantError(name) from exc
    return TenantRow(**row._mapping)


async def list_tenants(conn: AsyncConnection) -> list[TenantRow]:
    rows = await conn.execute(text(f"SELECT {_COLUMNS} FROM tenants ORDER BY created_at, id"))
    return [TenantRow(**r._mapping) for r in rows]


async def get_tenant(conn: AsyncConnection, tenant_id: UUID) -> TenantRow | None:
    row = (
        await conn.execute(
            text(f"SELECT {_COLUMNS} FROM tenants WHERE id = :id"), {"id": tenant_id}
        )
    ).one_or_none()
    return TenantRow(**row._mapping) if row else None


async def get_tenant_by_name(conn: AsyncConnection, name: str) -> TenantRow | None:
    row = (
        await conn.execute(text(f"SELECT {_COLUMNS} FROM tenants WHERE name = :n"), {"n": name})
    ).one_or_none()
    return TenantRow(**row._mapping) if row else None


async def tenant_exists(conn: AsyncConnection, tenant_id: UUID) -> bool:
    return bool(
        await conn.scalar(text("SELECT count(*) FROM tenants WHERE id = :t"), {"t": tenant_id})
    )


async def tenant_language(conn: AsyncConnection, tenant_id: UUID) -> str | None:
    """The tenant's full-text configuration name (also readable inside a tenant transaction)."""
    language = await conn.scalar(
        text("SELECT language::text FROM tenants WHERE id = :t"), {"t": tenant_id}
    )
    return None if language is None else str(language)


async def tenant_settings(conn: AsyncConnection, tenant_id: UUID) -> dict[str, Any]:
    """The tenant's settings object (readable by the tenant itself under row-level security)."""
    found = await conn.scalar(
        text("SELECT settings FROM tenants WHERE id = :id"), {"id": tenant_id}
    )
    return dict(found or {})


async def update_tenant_settings(
    conn: AsyncConnection, tenant_id: UUID, changes: dict[str, Any]
) -> dict[str, Any] | None:
    """Merge ``changes`` into the settings (a key set to None is removed: the default again);
    the new settings, None when there is no such tenant. Owner connection."""
    found = await conn.scalar(
        text(
            "UPDATE tenants SET settings = jsonb_strip_nulls(settings || :changes) "
            "WHERE id = :id RETURNING settings"
        ).bindparams(bindparam("changes", type_=JSONB)),
        {"id": tenant_id, "changes": changes},
    )
    return None if found is None else dict(found)
