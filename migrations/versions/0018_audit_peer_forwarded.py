"""The audit log keeps where a request came from in three parts: ``client`` (the address it is
attributed to: the connection's peer, or behind a trusted proxy the address that proxy
forwarded), ``peer`` (the connection's own peer address) and ``forwarded`` (the request's
``X-Forwarded-For`` chain as received, trusted or not: the client writes it). Entries written
before this migration have no peer and an empty chain.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-08
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "ALTER TABLE audit_log ADD COLUMN peer text, "
        "ADD COLUMN forwarded text[] NOT NULL DEFAULT '{}'"
    )


def downgrade() -> None:
    op.execute("ALTER TABLE audit_log DROP COLUMN forwarded, DROP COLUMN peer")
