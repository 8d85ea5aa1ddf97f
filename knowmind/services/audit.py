"""The audit trail of admin and erasure actions (``audit_log``, migrations 0007 and 0018): each
action appends its entry in its own transaction and emits one ``audit`` log event with the same
ids. Where the request came from is kept in three parts: ``client`` (the address it is
attributed to), ``peer`` (the connection's) and ``forwarded`` (``X-Forwarded-For`` as received;
believed for ``client`` only from a trusted proxy, ``knowmind.services.access``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.db.engine import Database
from knowmind.services.auth import Principal
from knowmind.store.audit import AuditEntry, AuditRow, append_entry, list_entries

__all__ = ["AuditRow", "AuditService", "actor_of", "record"]

log = structlog.get_logger(__name__)


def actor_of(who: Principal | None) -> str:
    """``token:<id>`` for a tenant token, ``server-admin``, or ``cli`` (the local operator)."""
    if who is None:
        return "cli"
    if who.token_id is not None:
        return f"token:{who.token_id}"
    return "server-admin" if who.is_server_admin else "unknown"


async def record(
    conn: AsyncConnection,
    who: Principal | None,
    action: str,
    tenant_id: UUID | None,
    targets: Sequence[UUID | str] = (),
    detail: dict[str, Any] | None = None,
    *,
    actor: str | None = None,
) -> int:
    """Append the entry (ids and counts only) and log it; returns its id. ``actor``: who acted
    where no caller did (a background step such as ``extractor:llm``), else ``who``'s."""
    entry = AuditEntry(
        actor or actor_of(who),
        action,
        tenant_id,
        targets,
        who.client if who else None,
        detail or {},
        peer=who.peer if who else None,
        forwarded=who.forwarded if who else (),
    )
    audit_id = await append_entry(conn, entry)
    log.info(
        "audit",
        audit_id=audit_id,
        action=action,
        actor=entry.actor,
        tenant=str(tenant_id) if tenant_id else None,
        targets=[str(t) for t in targets],
        client=entry.client,
        peer=entry.peer,
        forwarded=list(entry.forwarded),
    )
    return audit_id


class AuditService:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def entries(
        self, tenant_id: UUID | None, limit: int, before_id: int | None = None
    ) -> list[AuditRow]:
        """Newest first, all tenants' or one tenant's (server admin)."""
        async with self.db.owner_tx() as conn:
            return await list_entries(conn, tenant_id, limit, before_id)
