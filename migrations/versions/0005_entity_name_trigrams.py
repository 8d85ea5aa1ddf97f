"""Fuzzy entity matching within one tenant: a trigram index led by the tenant.

The GIN trigram index on ``entity_names.norm_name`` (0002) spans every tenant; for one tenant's
query the planner walks the tenant's names and computes each similarity instead (≈ 7 µs a
name: 10 ms at 1.5k names, a third of a second at 50k). A GiST index on (tenant_id,
norm_name gist_trgm_ops) (btree_gist, installed by 0004) answers ``%`` and ``<%`` for one
tenant from the index.
"""

from __future__ import annotations

from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE INDEX IF NOT EXISTS entity_names_tenant_trgm ON entity_names "
        "USING gist (tenant_id, norm_name gist_trgm_ops)"
    )


def downgrade() -> None:
    op.execute("DROP INDEX IF EXISTS entity_names_tenant_trgm")
