"""api_tokens. Only a SHA-256 of each token is stored."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.rows import TokenRow

__all__ = ["authenticate", "insert_token", "revoke_token"]


async def insert_token(
    conn: AsyncConnection, tenant_id: UUID, token_hash: bytes, scopes: list[str]
) -> TokenRow:
    row = (
        await conn.execute(
            text(
                "INSERT INTO api_tokens (tenant_id, token_hash, scopes) "
                "VALUES (:tenant, :hash, :scopes) RETURNING id, tenant_id, scopes, created_at"
            ),
            {"tenant": tenant_id, "hash": token_hash, "scopes": scopes},
        )
    ).one()
    return TokenRow(**row._mapping)


async def revoke_token(conn: AsyncConnection, token_id: UUID) -> UUID | None:
    """The revoked token's tenant; None when there was no such unrevoked token."""
    tenant: UUID | None = await conn.scalar(
        text(
            "UPDATE api_tokens SET revoked_at = now() WHERE id = :id AND revoked_at IS NULL "
            "RETURNING tenant_id"
        ),
        {"id": token_id},
    )
    return tenant


async def authenticate(
    conn: AsyncConnection, tenant_id: UUID, token_hash: bytes
) -> tuple[UUID, list[str], str] | None:
    """(token id, scopes, tenant language) for a live token; runs as the app role through the
    owner's SECURITY DEFINER function, since the app role cannot read api_tokens."""
    row = (
        await conn.execute(
            text("SELECT token_id, scopes, language FROM knowmind_authenticate(:tenant, :hash)"),
            {"tenant": tenant_id, "hash": token_hash},
        )
    ).one_or_none()
    return (row.token_id, list(row.scopes), row.language) if row else None
