"""Each chunk's sentence vectors (``chunk_sentences``).

A question usually matches one sentence of a paragraph; the paragraph's single embedding
dilutes it. The extraction job embeds each sentence of a chunk of two or more sentences and
stores the vectors here (float16, one row after the other); the ranker reads the question's
best sentence match for the short list (``store.candidates``). No row: a chunk of one sentence,
or one not reached yet (the ranker then reads the chunk's own cosine).

A table of its own, not a column of ``chunks``: writing a column of a chunk after its insert
would write a new version of the wide row and new entries in every index on it (its HNSW graph
included). Tenant isolation as for ``chunk_terms`` (derived rows without a user of their own,
read only through the chunks a session sees).

Every tenant with chunks gets one ``embed_sentences`` job (``ingest.sentences.SENTENCE_JOB``),
which walks its chunks without vectors in steps, in the job worker's lane for long work.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-12
"""

from __future__ import annotations

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE chunk_sentences (
          tenant_id uuid NOT NULL,
          chunk_id uuid NOT NULL,
          vectors bytea NOT NULL,
          PRIMARY KEY (tenant_id, chunk_id),
          FOREIGN KEY (tenant_id, chunk_id) REFERENCES chunks (tenant_id, id) ON DELETE CASCADE
        )
        """
    )
    op.execute("ALTER TABLE chunk_sentences ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON chunk_sentences "
        "USING (tenant_id = knowmind_current_tenant()) "
        "WITH CHECK (tenant_id = knowmind_current_tenant())"
    )
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON chunk_sentences TO knowmind_app")
    op.execute(
        "INSERT INTO jobs (tenant_id, kind, payload) "
        "SELECT t.id, 'embed_sentences', CAST('{}' AS jsonb) FROM tenants t "
        "WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.tenant_id = t.id)"
    )


def downgrade() -> None:
    op.execute("DELETE FROM jobs WHERE kind = 'embed_sentences'")
    op.execute("DROP TABLE chunk_sentences")
