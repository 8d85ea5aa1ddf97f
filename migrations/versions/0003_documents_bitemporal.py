"""Documents; transaction time on memories and edges (bi-temporal with valid time).

A document is stored as one memory (``memories.document_id``) whose chunks are the document's
chunks; replacing a document keeps its id and swaps the memory in one transaction.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE documents (
          tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          id uuid NOT NULL DEFAULT gen_random_uuid(),
          title text NOT NULL CHECK (length(title) BETWEEN 1 AND 500),
          norm_title text NOT NULL,
          source text,
          content_sha256 bytea NOT NULL,
          version integer NOT NULL DEFAULT 1,
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (tenant_id, id),
          UNIQUE (tenant_id, norm_title)
        )
        """
    )
    op.execute("ALTER TABLE documents ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON documents "
        "USING (tenant_id = knowmind_current_tenant()) "
        "WITH CHECK (tenant_id = knowmind_current_tenant())"
    )
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON documents TO knowmind_app")
    # Erasure receipts count the mirror deletions a tenant's transaction queued (RLS applies).
    op.execute("GRANT SELECT ON graph_outbox TO knowmind_app")
    for table in ("memories", "edges"):
        op.execute(
            f"ALTER TABLE {table} ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT now(), "
            "ADD COLUMN superseded_at timestamptz"
        )
    op.execute("CREATE INDEX memories_document ON memories (tenant_id, document_id)")
    # Idempotent remember: one current (not superseded) standalone memory per content hash.
    op.execute("DROP INDEX memories_content_sha")
    op.execute(
        "CREATE UNIQUE INDEX memories_content_sha ON memories (tenant_id, content_sha256) "
        "WHERE document_id IS NULL AND superseded_at IS NULL"
    )


def downgrade() -> None:
    op.execute("DROP INDEX memories_content_sha")
    op.execute(
        "CREATE UNIQUE INDEX memories_content_sha ON memories (tenant_id, content_sha256) "
        "WHERE document_id IS NULL"
    )
    op.execute("DROP INDEX IF EXISTS memories_document")
    for table in ("memories", "edges"):
        op.execute(f"ALTER TABLE {table} DROP COLUMN recorded_at, DROP COLUMN superseded_at")
    op.execute("DROP TABLE IF EXISTS documents CASCADE")
