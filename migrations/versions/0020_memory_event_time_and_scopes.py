"""Event time, speaker and scopes on every memory.

- ``occurred_at``: when what a memory tells happened or was said (a chat turn of last year);
  ``created_at`` stays when it was stored. Every insert path that leaves it out (an archive of
  an earlier version, the scale benchmark's COPY) gets the row's ``created_at``, set by a
  ``BEFORE INSERT`` trigger (a column default cannot name another column); the rows that exist
  are backfilled from ``created_at``.
- ``speaker`` (who said it, a name) and ``speaker_role`` (the API's ``role``: user, assistant,
  …).
- ``user_id``, ``agent_id``, ``session_id``: scopes inside a tenant (NULL: the tenant's shared
  memories). ``chunks.user_id`` repeats the memory's ``user_id`` (set by a trigger from the
  memory row whatever the writer sends), so that statements reading chunks alone can be held
  to a user by row-level security (migration 0021) without a join.

Indexes: the event time per tenant (time filters and time-aware recall), and each scope per
tenant where it is set (lists and filters by user, agent, session).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-09
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE memories ADD COLUMN occurred_at timestamptz, ADD COLUMN speaker text, "
        "ADD COLUMN speaker_role text, ADD COLUMN user_id text, ADD COLUMN agent_id text, "
        "ADD COLUMN session_id text"
    )
    op.execute("ALTER TABLE chunks ADD COLUMN user_id text")
    # the backfill changes no column the outbox trigger watches (title), nor any chunk
    op.execute("UPDATE memories SET occurred_at = created_at")
    op.execute("ALTER TABLE memories ALTER COLUMN occurred_at SET NOT NULL")
    op.execute(
        """
        CREATE FUNCTION knowmind_memory_occurred_at() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
          NEW.occurred_at := NEW.created_at;
          RETURN NEW;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER memories_occurred_at BEFORE INSERT ON memories FOR EACH ROW "
        "WHEN (NEW.occurred_at IS NULL) EXECUTE FUNCTION knowmind_memory_occurred_at()"
    )
    # The memory's user, read as the owner: a writer cannot give a chunk another user than
    # its memory's (row-level security keeps the chunk then where its memory is). A memory
    # written by the same statement is visible here too (the statement's earlier changes are,
    # to a volatile function); were it not, the writer's value stays (the foreign key still
    # holds the chunk to a memory).
    op.execute(
        """
        CREATE FUNCTION knowmind_chunk_user() RETURNS trigger
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp AS $$
        DECLARE
          owner text;
        BEGIN
          SELECT m.user_id INTO owner FROM memories m
            WHERE m.tenant_id = NEW.tenant_id AND m.id = NEW.memory_id;
          IF FOUND THEN
            NEW.user_id := owner;
          END IF;
          RETURN NEW;
        END $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION knowmind_chunk_user() FROM PUBLIC")
    op.execute(
        "CREATE TRIGGER chunks_user BEFORE INSERT OR UPDATE OF memory_id, user_id ON chunks "
        "FOR EACH ROW EXECUTE FUNCTION knowmind_chunk_user()"
    )
    op.execute("CREATE INDEX memories_occurred ON memories (tenant_id, occurred_at)")
    op.execute(
        "CREATE INDEX memories_user ON memories (tenant_id, user_id, created_at DESC, id DESC) "
        "WHERE user_id IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX memories_agent ON memories (tenant_id, agent_id) WHERE agent_id IS NOT NULL"
    )
    op.execute(
        "CREATE INDEX memories_session ON memories (tenant_id, session_id, occurred_at) "
        "WHERE session_id IS NOT NULL"
    )


def downgrade() -> None:
    for index in ("memories_session", "memories_agent", "memories_user", "memories_occurred"):
        op.execute(f"DROP INDEX IF EXISTS {index}")
    op.execute("DROP TRIGGER IF EXISTS chunks_user ON chunks")
    op.execute("DROP FUNCTION IF EXISTS knowmind_chunk_user()")
    op.execute("DROP TRIGGER IF EXISTS memories_occurred_at ON memories")
    op.execute("DROP FUNCTION IF EXISTS knowmind_memory_occurred_at()")
    op.execute("ALTER TABLE chunks DROP COLUMN IF EXISTS user_id")
    op.execute(
        "ALTER TABLE memories DROP COLUMN IF EXISTS session_id, DROP COLUMN IF EXISTS agent_id, "
        "DROP COLUMN IF EXISTS user_id, DROP COLUMN IF EXISTS speaker_role, "
        "DROP COLUMN IF EXISTS speaker, DROP COLUMN IF EXISTS occurred_at"
    )
