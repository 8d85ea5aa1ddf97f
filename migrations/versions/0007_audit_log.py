"""Audit log: an append-only record of every admin and erasure action.

One row per action, written in the action's own transaction (the entry exists exactly when the
action took effect): who (the token's id, or the server admin, or the local CLI), what, the
tenant and target ids, the client's address, counts — never content, queries or secrets. No
foreign key to the tenant: the record of a tenant's erasure outlives the tenant. A trigger
refuses UPDATE, DELETE and TRUNCATE for every role, the owner included.

Tenants write (and may read) their own entries through row-level security; the server admin
reads all of them through the owner connection.
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        """
        CREATE TABLE audit_log (
          id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
          at timestamptz NOT NULL DEFAULT clock_timestamp(),
          actor text NOT NULL,
          action text NOT NULL,
          tenant_id uuid,
          targets text[] NOT NULL DEFAULT '{}',
          client text,
          detail jsonb NOT NULL DEFAULT '{}'
        )
        """
    )
    op.execute("CREATE INDEX audit_log_tenant ON audit_log (tenant_id, id)")
    op.execute(
        """
        CREATE FUNCTION knowmind_audit_append_only() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
          RAISE EXCEPTION 'audit_log is append-only' USING ERRCODE = 'insufficient_privilege';
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log "
        "FOR EACH ROW EXECUTE FUNCTION knowmind_audit_append_only()"
    )
    op.execute(
        "CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log "
        "FOR EACH STATEMENT EXECUTE FUNCTION knowmind_audit_append_only()"
    )
    op.execute("ALTER TABLE audit_log ENABLE ROW LEVEL SECURITY")
    op.execute(
        "CREATE POLICY tenant_isolation ON audit_log "
        "USING (tenant_id = knowmind_current_tenant()) "
        "WITH CHECK (tenant_id = knowmind_current_tenant())"
    )
    op.execute("GRANT SELECT, INSERT ON audit_log TO knowmind_app")


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS audit_log")
    op.execute("DROP FUNCTION IF EXISTS knowmind_audit_append_only()")
