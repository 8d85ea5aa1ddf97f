"""Initial schema: tenants, tokens, memories, chunks; RLS; the knowmind_app role.

Every tenant-owned table carries tenant_id as the first column of its primary key, unique
constraints and foreign keys, so the tables can be distributed by tenant (Citus, co-located).

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TENANT_TABLES = ("api_tokens", "memories", "chunks")
HALFVEC_FROM_DIM = 1024


def upgrade() -> None:
    attrs = op.get_context().config.attributes
    model, dim = attrs["embedding_model"], int(attrs["embedding_dim"])
    if dim <= 0 or not model:
        raise RuntimeError("the initial migration needs the embedder's model id and dimension")
    # half-precision vectors for large embedders (1024-d e5-large: less than half the storage,
    # HNSW up to 4,000 dimensions); chosen once, when the schema is created
    storage = attrs.get("embedding_storage") or "auto"
    if storage == "auto":
        storage = "halfvec" if dim >= HALFVEC_FROM_DIM else "vector"
    if storage not in ("vector", "halfvec"):
        raise RuntimeError(f"embedding storage {storage!r}: expected vector or halfvec")

    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.execute(
        """
        DO $$ BEGIN
          IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'knowmind_app') THEN
            CREATE ROLE knowmind_app LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE;
          END IF;
        END $$
        """
    )
    op.execute("GRANT USAGE ON SCHEMA public TO knowmind_app")
    op.execute(
        """
        CREATE FUNCTION knowmind_current_tenant() RETURNS uuid
        LANGUAGE sql STABLE PARALLEL SAFE
        AS $$ SELECT nullif(current_setting('app.tenant_id', true), '')::uuid $$
        """
    )

    op.execute("CREATE TABLE knowmind_meta (key text PRIMARY KEY, value text NOT NULL)")
    op.execute(
        f"""
        INSERT INTO knowmind_meta (key, value)
        VALUES ('embedding_model', '{model.replace("'", "''")}'), ('embedding_dim', '{dim}'),
               ('embedding_storage', '{storage}')
        """
    )
    op.execute(
        """
        CREATE TABLE tenants (
          id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
          name text NOT NULL UNIQUE CHECK (length(name) BETWEEN 1 AND 200),
          language regconfig NOT NULL DEFAULT 'german',
          embedding_model text NOT NULL,
          embedding_dim integer NOT NULL CHECK (embedding_dim > 0),
          created_at timestamptz NOT NULL DEFAULT now()
        )
        """
    )
    op.execute(
        """
        CREATE TABLE api_tokens (
          tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          id uuid NOT NULL DEFAULT gen_random_uuid(),
          token_hash bytea NOT NULL,
          scopes text[] NOT NULL
            CHECK (cardinality(scopes) > 0 AND scopes <@ ARRAY['read', 'write', 'admin']),
          created_at timestamptz NOT NULL DEFAULT now(),
          last_used_at timestamptz,
          revoked_at timestamptz,
          PRIMARY KEY (tenant_id, id),
          UNIQUE (tenant_id, token_hash)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE memories (
          tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          id uuid NOT NULL DEFAULT gen_random_uuid(),
          title text,
          content text NOT NULL CHECK (length(content) > 0),
          memory_type text NOT NULL DEFAULT 'semantic'
            CHECK (memory_type IN ('semantic', 'episodic', 'procedural', 'reference')),
          tags text[] NOT NULL DEFAULT '{}',
          source text,
          domain text,
          metadata jsonb NOT NULL DEFAULT '{}',
          content_sha256 bytea NOT NULL,
          created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
          valid_from timestamptz NOT NULL DEFAULT now(),
          valid_to timestamptz,
          document_id uuid,
          PRIMARY KEY (tenant_id, id)
        )
        """
    )
    # sha-identical standalone memories are stored once (idempotent remember).
    op.execute(
        "CREATE UNIQUE INDEX memories_content_sha ON memories (tenant_id, content_sha256) "
        "WHERE document_id IS NULL"
    )
    op.execute("CREATE INDEX memories_newest ON memories (tenant_id, created_at DESC, id DESC)")
    op.execute("CREATE INDEX memories_tags ON memories USING gin (tags)")
    op.execute(
        f"""
        CREATE TABLE chunks (
          tenant_id uuid NOT NULL,
          id uuid NOT NULL DEFAULT gen_random_uuid(),
          memory_id uuid NOT NULL,
          ordinal integer NOT NULL,
          content text NOT NULL,
          context text,
          language regconfig NOT NULL,
          tsv tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector(language, coalesce(context, '')), 'A')
            || to_tsvector(language, content)
          ) STORED,
          embedding {storage}({dim}) NOT NULL,
          PRIMARY KEY (tenant_id, id),
          UNIQUE (tenant_id, memory_id, ordinal),
          FOREIGN KEY (tenant_id, memory_id) REFERENCES memories (tenant_id, id) ON DELETE CASCADE
        )
        """
    )
    op.execute("CREATE INDEX chunks_tenant ON chunks (tenant_id)")
    op.execute("CREATE INDEX chunks_tsv ON chunks USING gin (tsv)")
    op.execute(
        f"CREATE INDEX chunks_embedding ON chunks USING hnsw (embedding {storage}_cosine_ops)"
    )

    _row_level_security()
    _authentication_function()


def _row_level_security() -> None:
    op.execute("ALTER TABLE tenants ENABLE ROW LEVEL SECURITY")
    op.execute("CREATE POLICY tenant_isolation ON tenants USING (id = knowmind_current_tenant())")
    op.execute("GRANT SELECT ON tenants TO knowmind_app")
    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            "USING (tenant_id = knowmind_current_tenant()) "
            "WITH CHECK (tenant_id = knowmind_current_tenant())"
        )
    op.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON memories, chunks TO knowmind_app")
    op.execute("GRANT SELECT ON knowmind_meta TO knowmind_app")


def _authentication_function() -> None:
    # Tokens are looked up before a tenant is known, so the app role may not read api_tokens;
    # this owner-run function answers exactly one question: which scopes does this hash carry.
    op.execute(
        """
        CREATE FUNCTION knowmind_authenticate(p_tenant uuid, p_hash bytea)
        RETURNS TABLE (token_id uuid, scopes text[], language text)
        LANGUAGE plpgsql SECURITY DEFINER SET search_path = public, pg_temp
        AS $$
        BEGIN
          RETURN QUERY
            SELECT t.id, t.scopes, n.language::text FROM api_tokens t
            JOIN tenants n ON n.id = t.tenant_id
            WHERE t.tenant_id = p_tenant AND t.token_hash = p_hash AND t.revoked_at IS NULL;
          UPDATE api_tokens t SET last_used_at = now()
            WHERE t.tenant_id = p_tenant AND t.token_hash = p_hash AND t.revoked_at IS NULL
              AND (t.last_used_at IS NULL OR t.last_used_at < now() - interval '1 minute');
        END $$
        """
    )
    op.execute("REVOKE ALL ON FUNCTION knowmind_authenticate(uuid, bytea) FROM PUBLIC")
    op.execute("GRANT EXECUTE ON FUNCTION knowmind_authenticate(uuid, bytea) TO knowmind_app")


def downgrade() -> None:
    op.execute("DROP FUNCTION IF EXISTS knowmind_authenticate(uuid, bytea)")
    for table in ("chunks", "memories", "api_tokens", "tenants", "knowmind_meta"):
        op.execute(f"DROP TABLE IF EXISTS {table} CASCADE")
    op.execute("DROP FUNCTION IF EXISTS knowmind_current_tenant()")
    op.execute("REVOKE ALL ON SCHEMA public FROM knowmind_app")
