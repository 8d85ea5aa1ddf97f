"""Background work in steps, under per-tenant quotas.

``jobs.payload_bytes``: the size of a job's payload when it was queued (a large document's text),
summed per tenant over the jobs still waiting or running for the quota on queued background
bytes (``jobs_queued`` keeps that sum and the count an index-only scan). ``jobs.progress``: how
far a job that runs in steps has come (shown to the caller, read when it resumes).
``job_parts``: what the steps of a job produced so far (a document job's embeddings, a batch of
chunks per step), so that a job taken over after a crash resumes where it stopped; the rows go
with their job (and with the tenant).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-08
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE jobs ADD COLUMN payload_bytes integer NOT NULL DEFAULT 0")
    op.execute("ALTER TABLE jobs ADD COLUMN progress jsonb")
    op.execute(
        "UPDATE jobs SET payload_bytes = octet_length(payload::text) "
        "WHERE status IN ('pending', 'running')"
    )
    op.execute(
        "CREATE INDEX jobs_queued ON jobs (tenant_id) INCLUDE (payload_bytes) "
        "WHERE status IN ('pending', 'running')"
    )
    op.execute(
        """
        CREATE TABLE job_parts (
          tenant_id uuid NOT NULL,
          job_id uuid NOT NULL,
          part integer NOT NULL CHECK (part >= 0),
          data bytea NOT NULL,
          PRIMARY KEY (tenant_id, job_id, part),
          FOREIGN KEY (tenant_id, job_id) REFERENCES jobs (tenant_id, id) ON DELETE CASCADE
        )
        """
    )
    op.execute("ALTER TABLE job_parts ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON job_parts "
        "USING (tenant_id = knowmind_current_tenant()) "
        "WITH CHECK (tenant_id = knowmind_current_tenant())"
    )
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON job_parts TO knowmind_app")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS job_parts")
    op.execute("DROP INDEX IF EXISTS jobs_queued")
    op.execute("ALTER TABLE jobs DROP COLUMN IF EXISTS progress")
    op.execute("ALTER TABLE jobs DROP COLUMN IF EXISTS payload_bytes")
