"""Each chunk's sentence vectors (``chunks.sentence_vectors``).

A question usually matches one sentence of a paragraph; the paragraph's single embedding
dilutes it. The extraction job embeds each sentence of a chunk of two or more sentences and
stores the vectors here (float16, one row after the other); the ranker reads the question's
best sentence match for the short list (``store.candidates``). NULL: a chunk of one sentence, or
one the job has not reached yet (the ranker then reads the chunk's own cosine). The memories
that exist get an ``embed_sentences`` job each (``ingest.sentences.SENTENCE_JOB``: the sentence
vectors alone, no extraction again), which the job worker runs in the background, each tenant
taking its turn.

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
    op.execute("ALTER TABLE chunks ADD COLUMN sentence_vectors bytea")
    # a chunk under 40 characters holds at most one sentence worth a vector
    op.execute(
        "INSERT INTO jobs (tenant_id, kind, payload) "
        "SELECT m.tenant_id, 'embed_sentences', jsonb_build_object('memory_id', CAST(m.id AS text)) "
        "FROM memories m WHERE EXISTS (SELECT 1 FROM chunks c WHERE c.tenant_id = m.tenant_id "
        "AND c.memory_id = m.id AND length(c.content) >= 40)"
    )


def downgrade() -> None:
    op.execute("DELETE FROM jobs WHERE kind = 'embed_sentences'")
    op.execute("ALTER TABLE chunks DROP COLUMN sentence_vectors")
