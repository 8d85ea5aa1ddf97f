"""Each memory records the language its content is written in (``content_language``, a
text-search configuration name such as ``german``; NULL when unknown), detected when it is
written. The ranker reads whether a memory is in the question's language; memories written
before this migration have none (the ranker treats that as unknown).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE memories ADD COLUMN content_language text")


def downgrade() -> None:
    op.execute("ALTER TABLE memories DROP COLUMN content_language")
