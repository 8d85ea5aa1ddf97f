"""The stored turns of a remembered conversation (data plane: inside a tenant transaction).

A turn is a standalone memory with the conversation's ``session_id`` and its position in the
session in ``metadata.turn`` (``services.turns``)."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["StoredTurn", "turns_before"]


@dataclass(frozen=True, slots=True)
class StoredTurn:
    turn: int
    content: str
    speaker: str | None
    role: str | None


async def turns_before(
    conn: AsyncConnection,
    tenant_id: UUID,
    session_id: str,
    user_id: str | None,
    agent_id: str | None,
    before: int,
    limit: int,
) -> list[StoredTurn]:
    """The session's current turns at the ``limit`` positions before ``before``, oldest first
    (of the same user and agent; a position stored twice, by another message id, once)."""
    if limit <= 0 or before <= 0:
        return []
    rows = await conn.execute(
        text(
            # (the cast only of what reads as a position: a CASE, whatever order the
            # planner evaluates the conditions in)
            "SELECT DISTINCT ON (t.turn) t.turn, t.content, t.speaker, t.speaker_role FROM ("
            " SELECT CASE WHEN jsonb_typeof(m.metadata -> 'turn') = 'number' "
            " AND m.metadata ->> 'turn' ~ '^[0-9]{1,9}$' "
            " THEN CAST(m.metadata ->> 'turn' AS integer) END AS turn, m.content, m.speaker, "
            " m.speaker_role, m.created_at FROM memories m "
            " WHERE m.tenant_id = :t AND m.session_id = :s "
            " AND m.user_id IS NOT DISTINCT FROM :u AND m.agent_id IS NOT DISTINCT FROM :a "
            " AND m.document_id IS NULL AND m.superseded_at IS NULL) t "
            "WHERE t.turn >= :lo AND t.turn < :hi ORDER BY t.turn, t.created_at DESC"
        ),
        {
            "t": tenant_id,
            "s": session_id,
            "u": user_id,
            "a": agent_id,
            "lo": max(0, before - limit),
            "hi": before,
        },
    )
    return [StoredTurn(r.turn, r.content, r.speaker, r.speaker_role) for r in rows]
