"""conversations and their turns (data plane: called inside a tenant transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "Conversation",
    "Turn",
    "add_turns",
    "create_conversation",
    "find_conversation",
    "recent_turns",
]


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str  # the client's own (1-200 characters; a UUID in its canonical form)
    owner_token: UUID | None
    shared: bool


@dataclass(frozen=True, slots=True)
class Turn:
    role: str  # "user" | "assistant"
    content: str
    standalone: str | None = None  # a user turn's question as retrieval saw it


async def find_conversation(
    conn: AsyncConnection, tenant_id: UUID, conversation_id: str, *, lock: bool = False
) -> Conversation | None:
    row = (
        await conn.execute(
            text(
                "SELECT id, owner_token, shared FROM conversations WHERE tenant_id = :t "
                "AND id = :id" + (" FOR UPDATE" if lock else "")
            ),
            {"t": tenant_id, "id": conversation_id},
        )
    ).first()
    return None if row is None else Conversation(row[0], row[1], row[2])


async def create_conversation(
    conn: AsyncConnection,
    tenant_id: UUID,
    conversation_id: str,
    owner_token: UUID | None,
    shared: bool,
) -> Conversation:
    """The conversation, created unless it exists (then as it is)."""
    await conn.execute(
        text(
            "INSERT INTO conversations (tenant_id, id, owner_token, shared) "
            "VALUES (:t, :id, :owner, :shared) ON CONFLICT DO NOTHING"
        ),
        {"t": tenant_id, "id": conversation_id, "owner": owner_token, "shared": shared},
    )
    found = await find_conversation(conn, tenant_id, conversation_id)
    assert found is not None
    return found


async def recent_turns(
    conn: AsyncConnection, tenant_id: UUID, conversation_id: str, limit: int
) -> list[Turn]:
    """The last ``limit`` turns, oldest first."""
    rows = await conn.execute(
        text(
            "SELECT role, content, standalone FROM (SELECT role, content, standalone, ordinal "
            "FROM conversation_turns WHERE tenant_id = :t AND conversation_id = :id "
            "ORDER BY ordinal DESC LIMIT :limit) AS last ORDER BY ordinal"
        ),
        {"t": tenant_id, "id": conversation_id, "limit": limit},
    )
    return [Turn(r[0], r[1], r[2]) for r in rows]


async def add_turns(
    conn: AsyncConnection, tenant_id: UUID, conversation_id: str, turns: Sequence[Turn]
) -> None:
    """Append ``turns`` after the conversation's last (its row locked: one writer at a time)."""
    await find_conversation(conn, tenant_id, conversation_id, lock=True)
    last = await conn.scalar(
        text(
            "SELECT coalesce(max(ordinal), 0) FROM conversation_turns "
            "WHERE tenant_id = :t AND conversation_id = :id"
        ),
        {"t": tenant_id, "id": conversation_id},
    )
    rows = [
        {
            "t": tenant_id,
            "id": conversation_id,
            "n": int(last or 0) + offset,
            "role": turn.role,
            "content": turn.content,
            "standalone": turn.standalone,
        }
        for offset, turn in enumerate(turns, start=1)
    ]
    if rows:
        await conn.execute(
            text(
                "INSERT INTO conversation_turns (tenant_id, conversation_id, ordinal, role, "
                "content, standalone) VALUES (:t, :id, :n, :role, :content, :standalone)"
            ),
            rows,
        )
    await conn.execute(
        text("UPDATE conversations SET updated_at = now() WHERE tenant_id = :t AND id = :id"),
        {"t": tenant_id, "id": conversation_id},
    )
