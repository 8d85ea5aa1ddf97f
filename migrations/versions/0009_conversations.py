"""Conversations of the answer endpoint: a thread of turns per tenant, owned by the token that
started it (another token of the tenant sees it only when it was started as shared).

Row-level security as on every tenant table; the tenant's erasure removes them (foreign key
``ON DELETE CASCADE`` to tenants, and the erasure's table list).
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

TABLES = ("conversations", "conversation_turns")


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE conversations (
          tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          id uuid NOT NULL,
          owner_token uuid,
          shared boolean NOT NULL DEFAULT false,
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (tenant_id, id)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE conversation_turns (
          tenant_id uuid NOT NULL,
          conversation_id uuid NOT NULL,
          ordinal integer NOT NULL,
          role text NOT NULL CHECK (role IN ('user', 'assistant')),
          content text NOT NULL,
          standalone text,
          created_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (tenant_id, conversation_id, ordinal),
          FOREIGN KEY (tenant_id, conversation_id)
            REFERENCES conversations (tenant_id, id) ON DELETE CASCADE
        )
        """
    )
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            "USING (tenant_id = knowmind_current_tenant()) "
            "WITH CHECK (tenant_id = knowmind_current_tenant())"
        )
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO knowmind_app")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS conversation_turns")
    op.execute("DROP TABLE IF EXISTS conversations")
