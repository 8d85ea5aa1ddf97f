"""RAPTOR summary trees: per document, summaries of clusters of its chunks (level 1), of clusters
of those summaries (level 2), up to three levels, each embedded like a chunk.

A tree lives in its own table, so no recall stage and no other answer method ever sees a summary;
its rows belong to the document (foreign key ``ON DELETE CASCADE``: erasing or deleting the
document erases its tree). Row-level security as on every tenant table. The embedding column
has the chunks' type (``vector`` or ``halfvec`` of the model's dimension, chosen in 0001); a
tenant's summaries are few (a few per document), so they are searched exactly, without an index.
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    embedding_type = op.get_bind().scalar(
        text(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
        )
    )
    op.execute(
        f"""
        CREATE TABLE summary_nodes (
          tenant_id uuid NOT NULL,
          id uuid NOT NULL DEFAULT gen_random_uuid(),
          document_id uuid NOT NULL,
          level smallint NOT NULL CHECK (level BETWEEN 1 AND 3),
          content text NOT NULL,
          children integer NOT NULL CHECK (children > 0),
          embedding {embedding_type} NOT NULL,
          model text NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (tenant_id, id),
          FOREIGN KEY (tenant_id, document_id)
            REFERENCES documents (tenant_id, id) ON DELETE CASCADE
        )
        """
    )
    op.execute("CREATE INDEX summary_nodes_document ON summary_nodes (tenant_id, document_id)")
    op.execute("ALTER TABLE summary_nodes ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON summary_nodes "
        "USING (tenant_id = knowmind_current_tenant()) "
        "WITH CHECK (tenant_id = knowmind_current_tenant())"
    )
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON summary_nodes TO knowmind_app")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS summary_nodes")
