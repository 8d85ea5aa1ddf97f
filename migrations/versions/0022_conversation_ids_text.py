"""A conversation of the answer endpoint is named by the client: any string of 1 to 200
characters (``conversation_id``), no longer only a UUID. Clients that thread their own chats
(Minder and its like) send their own ids; a UUID is kept in its canonical form, so the
conversations made before this stay as they were.

``conversations.id`` and ``conversation_turns.conversation_id`` become ``text``; the foreign key
between them is dropped and made again around the change (PostgreSQL cannot change the two
types one at a time under it).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-10
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

FOREIGN_KEY = "conversation_turns_tenant_id_conversation_id_fkey"
ID_LENGTH = "conversations_id_length"
UUID_TEXT = "'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'"


def _retype(column_type: str, using: str) -> None:
    op.execute(f"ALTER TABLE conversation_turns DROP CONSTRAINT {FOREIGN_KEY}")
    op.execute(
        f"ALTER TABLE conversations ALTER COLUMN id TYPE {column_type} USING {using.format('id')}"
    )
    op.execute(
        f"ALTER TABLE conversation_turns ALTER COLUMN conversation_id TYPE {column_type} "
        f"USING {using.format('conversation_id')}"
    )
    op.execute(
        f"ALTER TABLE conversation_turns ADD CONSTRAINT {FOREIGN_KEY} "
        "FOREIGN KEY (tenant_id, conversation_id) REFERENCES conversations (tenant_id, id) "
        "ON DELETE CASCADE"
    )


def upgrade() -> None:
    _retype("text", "CAST({} AS text)")
    op.execute(
        f"ALTER TABLE conversations ADD CONSTRAINT {ID_LENGTH} "
        "CHECK (char_length(id) BETWEEN 1 AND 200)"
    )


def downgrade() -> None:
    # conversations named by a client string have no UUID to go back to: they go (their
    # turns with them, ON DELETE CASCADE)
    op.execute(f"DELETE FROM conversations WHERE id !~ {UUID_TEXT}")
    op.execute(f"ALTER TABLE conversations DROP CONSTRAINT {ID_LENGTH}")
    _retype("uuid", "CAST({} AS uuid)")
