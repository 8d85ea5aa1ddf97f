"""Each chunk's sentence vectors (``chunks.sentence_vectors``).

A question usually matches one sentence of a paragraph; the paragraph's single embedding
dilutes it. The extraction job embeds each sentence of a chunk of two or more sentences and
stores the vectors here (float16, one row after the other); the ranker reads the question's
best sentence match for the short list (``store.candidates``). NULL: a chunk of one sentence, or
one the job has not reached yet (the ranker then reads the chunk's own cosine). Rows that exist
are filled when their memory is next extracted; nothing is backfilled here.

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


def downgrade() -> None:
    op.execute("ALTER TABLE chunks DROP COLUMN sentence_vectors")
