"""Statement chunks: a chunk may carry the kind of statement it is (``preference``, ``fact``,
``update``), as knowmind's client tags the short statements it extracts from a user's words.

Untagged chunks (every chunk the server makes) keep ``kind`` NULL. The statements stage of a
recall reads a tenant's statements of the kinds a question asks for through a partial index of
the tagged rows only, so it costs nothing where no client sends them.
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE chunks ADD COLUMN kind text "
        "CONSTRAINT chunks_kind_known CHECK (kind IN ('preference', 'fact', 'update'))"
    )
    op.execute("CREATE INDEX chunks_statements ON chunks (tenant_id, kind) WHERE kind IS NOT NULL")


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS chunks_statements")
    op.execute("ALTER TABLE chunks DROP COLUMN IF EXISTS kind")
