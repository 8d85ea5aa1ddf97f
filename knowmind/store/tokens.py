"""api_tokens. Only a SHA-256 of each token is stored."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.rows import TokenRow

__all__ = ["authenticate", "insert_token", "revoke_token"]


async def insert_token(
    conn: AsyncConnection,
    tenant_id: UUID,
    token_hash: bytes,
    scopes: list[str],
    user_id: str | None = None,
) -> TokenRow:
    """``user_id``: the end user the token is bound to (None: the whole tenant)."""
    row = (
        await conn.execute(
            text(
                "INSERT INTO api_tokens (tenant_id, token_hash, scopes, user_id) "
                "VALUES (:tenant, :hash, :scopes, :user) "
                "RETURNING id, tenant_id, scopes, created_at, user_id"
            ),
            {"tenant": tenant_id, "hash": token_hash, "scopes": scopes, "user": user_id},
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
) -> tuple[UUID, list[str], str, str | None] | None:
    """(token id, scopes, tenant language, the end user it is bound to or None) for a live
    token; runs as the app role through the owner's SECURITY DEFINER function, since the app
    role cannot read api_tokens."""
    row = (
        await conn.execute(
            text(
                "SELECT token_id, scopes, language, user_id "
                "FROM knowmind_authenticate(:tenant, :hash)"
            ),
            {"tenant": tenant_id, "hash": token_hash},
        )
    ).one_or_none()
    return (row.token_id, list(row.scopes), row.language, row.user_id) if row else None
