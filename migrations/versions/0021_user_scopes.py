"""User scopes inside a tenant, enforced by row-level security.

A token may be bound to one end user of its tenant (``api_tokens.user_id``; the token lookup
returns it). A session of such a token sets ``app.user_id`` beside ``app.tenant_id``
(``knowmind.db.tenant_scope``), and restrictive policies on ``memories`` and ``chunks`` (whose
``user_id`` repeats its memory's, migration 0020) then hold it to that user, whatever the
statement says:

- reading (SELECT, and the rows an UPDATE or DELETE may see): the user's rows and the tenant's
  shared ones (``user_id`` NULL);
- writing (INSERT, the new row of an UPDATE) and changing or deleting: the user's own rows only.

Without ``app.user_id`` (a tenant-wide token, the job workers, the admin plane) the policies
let everything through, as before. Each is one expression on the row:
``coalesce(user_id = knowmind_current_user(), <no user set>)``; the planner estimates it as
any opaque boolean (no selectivity of a stable function's comparison to misjudge), so the
plans of tenant-wide sessions, the HNSW walks and the BM25 reads keep their shape.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-09
"""

from __future__ import annotations

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

TABLES = ("memories", "chunks")
# what a user-bound session reads: its user's rows and the shared ones
_SEES = "coalesce(user_id = knowmind_current_user(), true)"
# what it writes, changes and deletes: its user's rows only (everything without a user set)
_OWNS = "coalesce(user_id = knowmind_current_user(), knowmind_current_user() IS NULL)"


def _authenticate(with_user: bool) -> str:
    user_column = ", user_id text" if with_user else ""
    user_value = ", t.user_id" if with_user else ""
    return f"""
        CREATE FUNCTION knowmind_authenticate(p_tenant uuid, p_hash bytea)
        RETURNS TABLE (token_id uuid, scopes text[], language text{user_column})
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp
        AS $$
        BEGIN
          RETURN QUERY
            SELECT t.id, t.scopes, n.language::text{user_value} FROM api_tokens t
            JOIN tenants n ON n.id = t.tenant_id
            WHERE t.tenant_id = p_tenant AND t.token_hash = p_hash AND t.revoked_at IS NULL;
          UPDATE api_tokens t SET last_used_at = now()
            WHERE t.tenant_id = p_tenant AND t.token_hash = p_hash AND t.revoked_at IS NULL
              AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute');
        END $$
        """


def _replace_authenticate(with_user: bool) -> None:
    op.execute("DROP FUNCTION knowmind_authenticate(uuid, bytea)")
    op.execute(_authenticate(with_user))
    op.execute("REVOKE ALL ON FUNCTION knowmind_authenticate(uuid, bytea) FROM PUBLIC")
    op.execute("GRANT EXECUTE ON FUNCTION knowmind_authenticate(uuid, bytea) TO knowmind_app")


def upgrade() -> None:
    op.execute(
        "ALTER TABLE api_tokens ADD COLUMN user_id text CHECK (length(user_id) BETWEEN 1 AND 200)"
    )
    _replace_authenticate(with_user=True)
    op.execute(
        """
        CREATE FUNCTION knowmind_current_user() RETURNS text
        LANGUAGE sql STABLE PARALLEL SAFE
        AS $$ SELECT nullif(current_setting('app.user_id', true), '') $$
        """
    )
    for table in TABLES:
        op.execute(
            f"CREATE POLICY user_scope_read ON {table} AS RESTRICTIVE FOR SELECT USING ({_SEES})"
        )
        op.execute(
            f"CREATE POLICY user_scope_insert ON {table} AS RESTRICTIVE FOR INSERT "
            f"WITH CHECK ({_OWNS})"
        )
        op.execute(
            f"CREATE POLICY user_scope_update ON {table} AS RESTRICTIVE FOR UPDATE "
            f"USING ({_OWNS}) WITH CHECK ({_OWNS})"
        )
        op.execute(
            f"CREATE POLICY user_scope_delete ON {table} AS RESTRICTIVE FOR DELETE USING ({_OWNS})"
        )


def downgrade() -> None:
    for table in TABLES:
        for action in ("read", "insert", "update", "delete"):
            op.execute(f"DROP POLICY IF EXISTS user_scope_{action} ON {table}")
    op.execute("DROP FUNCTION IF EXISTS knowmind_current_user()")
    _replace_authenticate(with_user=False)
    op.execute("ALTER TABLE api_tokens DROP COLUMN IF EXISTS user_id")
