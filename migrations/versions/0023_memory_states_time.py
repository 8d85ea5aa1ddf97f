"""Whether a memory's text states a time (``memories.states_time``).

A "when …"/"wann …" question is answered by what says when it happened ("yesterday", "last
May", "for three years now"); the time stage searches the memories that state one (the
question's nearest among them), so that such a memory reaches the ranker even where its words
share little with the question. The writer computes the flag from the content
(``recall.timeframe.mentions_time``) on every insert; the rows that exist are backfilled here
in batches (NULL: not known, never searched as stating a time).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-11
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from knowmind.recall.timeframe import mentions_time

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None

BATCH = 2_000


def upgrade() -> None:
    op.execute("ALTER TABLE memories ADD COLUMN states_time boolean")
    conn = op.get_bind()
    last = None
    while True:
        rows = conn.execute(
            sa.text(
                "SELECT tenant_id, id, content FROM memories "
                "WHERE (CAST(:last_tenant AS uuid) IS NULL "
                "OR (tenant_id, id) > (CAST(:last_tenant AS uuid), CAST(:last_id AS uuid))) "
                "ORDER BY tenant_id, id LIMIT :batch"
            ),
            {
                "last_tenant": last and last[0],
                "last_id": last and last[1],
                "batch": BATCH,
            },
        ).all()
        if not rows:
            break
        conn.execute(
            sa.text(
                "UPDATE memories m SET states_time = u.states FROM unnest("
                "CAST(:tenants AS uuid[]), CAST(:ids AS uuid[]), CAST(:states AS boolean[])) "
                "AS u (tenant_id, id, states) WHERE m.tenant_id = u.tenant_id AND m.id = u.id"
            ),
            {
                "tenants": [r.tenant_id for r in rows],
                "ids": [r.id for r in rows],
                "states": [mentions_time(r.content) for r in rows],
            },
        )
        last = (rows[-1].tenant_id, rows[-1].id)


def downgrade() -> None:
    op.execute("ALTER TABLE memories DROP COLUMN states_time")
