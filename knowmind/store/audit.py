"""audit_log (migrations 0007, 0018): append, and read back newest first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["AuditEntry", "AuditRow", "append_entry", "list_entries"]


@dataclass(frozen=True, slots=True)
class AuditEntry:
    actor: str  # "token:<id>", "server-admin" or "cli"
    action: str  # e.g. "tenant.erase"
    tenant_id: UUID | None
    targets: Sequence[UUID | str] = ()
    client: str | None = None  # the address the request is attributed to
    detail: dict[str, Any] = field(default_factory=dict)  # counts and ids, never content
    peer: str | None = None  # the connection's peer
    forwarded: Sequence[str] = ()  # X-Forwarded-For as received


class AuditRow(msgspec.Struct, frozen=True):
    id: int
    at: datetime
    actor: str
    action: str
    tenant_id: UUID | None
    targets: list[str]
    client: str | None
    detail: dict[str, Any]
    peer: str | None
    forwarded: list[str]


async def append_entry(conn: AsyncConnection, entry: AuditEntry) -> int:
    """The new entry's id (in the caller's transaction: it stands or falls with the action)."""
    return int(
        await conn.scalar(
            text(
                "INSERT INTO audit_log "
                "(actor, action, tenant_id, targets, client, detail, peer, forwarded) "
                "VALUES (:actor, :action, :tenant, CAST(:targets AS text[]), :client, "
                "CAST(:detail AS jsonb), :peer, CAST(:forwarded AS text[])) RETURNING id"
            ),
            {
                "actor": entry.actor,
                "action": entry.action,
                "tenant": entry.tenant_id,
                "targets": [str(t) for t in entry.targets],
                "client": entry.client,
                "detail": msgspec.json.encode(entry.detail).decode(),
                "peer": entry.peer,
                "forwarded": list(entry.forwarded),
            },
        )
    )


async def list_entries(
    conn: AsyncConnection, tenant_id: UUID | None, limit: int, before_id: int | None = None
) -> list[AuditRow]:
    """Newest first; one tenant's entries, or all of them (``tenant_id`` None, owner only)."""
    rows = await conn.execute(
        text(
            "SELECT id, at, actor, action, tenant_id, targets, client, detail, peer, forwarded "
            "FROM audit_log "
            "WHERE (CAST(:tenant AS uuid) IS NULL OR tenant_id = :tenant) "
            "AND (CAST(:before AS bigint) IS NULL OR id < :before) ORDER BY id DESC LIMIT :limit"
        ),
        {"tenant": tenant_id, "before": before_id, "limit": limit},
    )
    return [AuditRow(**r._mapping) for r in rows]
