"""documents: one row per title; the content lives in a memory (``memories.document_id``)."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.scalars import maybe_id

__all__ = [
    "DocumentRow",
    "delete_document",
    "find_document",
    "insert_document",
    "update_document",
]

_COLUMNS = "id, title, source, content_sha256, version, created_at, updated_at"


class DocumentRow(msgspec.Struct, frozen=True):
    id: UUID
    title: str
    source: str | None
    content_sha256: bytes
    version: int
    created_at: datetime
    updated_at: datetime


async def find_document(
    conn: AsyncConnection,
    tenant_id: UUID,
    *,
    document_id: UUID | None = None,
    norm_title: str | None = None,
    lock: bool = False,
) -> DocumentRow | None:
    where = "id = :id" if document_id is not None else "norm_title = :title"
    row = (
        await conn.execute(
            text(
                f"SELECT {_COLUMNS} FROM documents WHERE tenant_id = :t AND {where}"
                + (" FOR UPDATE" if lock else "")
            ),
            {"t": tenant_id, "id": document_id, "title": norm_title},
        )
    ).one_or_none()
    return DocumentRow(**row._mapping) if row else None


async def insert_document(
    conn: AsyncConnection,
    tenant_id: UUID,
    *,
    title: str,
    norm_title: str,
    source: str | None,
    sha256: bytes,
) -> UUID | None:
    """None when another document took the title first (a concurrent upload)."""
    return await maybe_id(
        conn,
        text(
            "INSERT INTO documents (tenant_id, title, norm_title, source, content_sha256) "
            "VALUES (:t, :title, :norm, :source, :sha) "
            "ON CONFLICT (tenant_id, norm_title) DO NOTHING RETURNING id"
        ),
        {"t": tenant_id, "title": title, "norm": norm_title, "source": source, "sha": sha256},
    )


async def update_document(
    conn: AsyncConnection,
    tenant_id: UUID,
    document_id: UUID,
    *,
    title: str,
    norm_title: str,
    source: str | None,
    sha256: bytes,
) -> None:
    await conn.execute(
        text(
            "UPDATE documents SET title = :title, norm_title = :norm, source = :source, "
            "content_sha256 = :sha, version = version + 1, updated_at = now() "
            "WHERE tenant_id = :t AND id = :id"
        ),
        {
            "t": tenant_id,
            "id": document_id,
            "title": title,
            "norm": norm_title,
            "source": source,
            "sha": sha256,
        },
    )


async def delete_document(conn: AsyncConnection, tenant_id: UUID, document_id: UUID) -> None:
    """The document row only; its memories are erased separately (``store.erasure``)."""
    await conn.execute(
        text("DELETE FROM documents WHERE tenant_id = :t AND id = :d"),
        {"t": tenant_id, "d": document_id},
    )
