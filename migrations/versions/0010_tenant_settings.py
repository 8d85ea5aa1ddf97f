"""Per-tenant settings (``GET``/``PATCH /v1/settings``): a JSON object on the tenant row —
today the tenant's language model (``llm_model``) and whether answers may expand a question into
several (``multi_query``). Unset keys take the server's defaults."""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE tenants ADD COLUMN settings jsonb NOT NULL DEFAULT '{}'::jsonb")


def downgrade() -> None:
    op.execute("ALTER TABLE tenants DROP COLUMN IF EXISTS settings")
