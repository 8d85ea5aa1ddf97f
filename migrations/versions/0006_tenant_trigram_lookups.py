"""Trigram look-ups (typo corrections, fuzzy entity names) as tenant-led GIN index scans.

Under row-level security pg_trgm's ``%`` and ``<%`` cannot become index conditions (they are
not leakproof), so 0004/0005 walked a GiST (tenant_id, trigram) index nearest-first instead.
That walk visits pages of many tenants (≈ 1 ms a word for a 100-chunk tenant among 1,200, 3–4
ms in a 100k-chunk one). A GIN (tenant_id, trigram) index answers ``tenant_id = t AND x % w``
by intersecting posting lists: ≈ 0.3–0.5 ms a word whatever the tenant's size.

The look-ups run in two owner-run functions so the index conditions apply; each reads the
tenant it is asked about only when it is the session's tenant, exactly as the row-level
policies read it (``knowmind_current_tenant()``: no tenant set, no rows). The app role may execute them
and nothing else changes hands.
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# pg_trgm's default thresholds, pinned so a server-wide setting cannot change what matches:
# ``%`` (similarity) and ``<%`` (word similarity).
SIMILARITY = 0.3
WORD_SIMILARITY = 0.6

# pg_trgm's functions are costed like an integer comparison, so the planner would rather
# filter the tenant's rows one by one through a B-tree (≈ 8 µs a name: 12 ms for 1.5k names)
# than intersect the GIN posting lists (≈ 0.5 ms): plain index scans are off in the look-ups,
# which leaves the bitmap scan of the trigram index.
_OWNER_RUN = (
    "LANGUAGE sql STABLE SECURITY DEFINER SET search_path = public, pg_temp "
    f"SET pg_trgm.similarity_threshold = {SIMILARITY} "
    f"SET pg_trgm.word_similarity_threshold = {WORD_SIMILARITY} "
    "SET enable_indexscan = off SET enable_indexonlyscan = off"
)
_SIGNATURES = (
    "knowmind_similar_lexemes(uuid, text[], real, int)",
    "knowmind_similar_names(uuid, text[], int)",
)


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    op.execute(
        "CREATE INDEX bm25_lexemes_tenant_trgm ON bm25_lexemes "
        "USING gin (tenant_id, lower(lexeme) gin_trgm_ops)"
    )
    op.execute("DROP INDEX IF EXISTS bm25_lexemes_trgm")
    op.execute(
        "CREATE INDEX entity_names_tenant_gin ON entity_names "
        "USING gin (tenant_id, norm_name gin_trgm_ops)"
    )
    op.execute("DROP INDEX IF EXISTS entity_names_tenant_trgm")
    op.execute("DROP INDEX IF EXISTS entity_names_trgm")
    # the session's vocabulary lexemes at least p_threshold similar to each word, best first
    # (ties: higher df), at most p_per_word each
    op.execute(
        f"""
        CREATE FUNCTION knowmind_similar_lexemes(
          p_tenant uuid, p_words text[], p_threshold real, p_per_word int
        )
        RETURNS TABLE (word text, lexeme text, similarity real, df integer) {_OWNER_RUN}
        AS $$
          SELECT q.w, m.lexeme, m.sim, m.df FROM unnest(p_words) AS q(w)
          CROSS JOIN LATERAL (
            SELECT l.lexeme, similarity(l.lexeme, q.w) AS sim, l.df FROM bm25_lexemes l
            WHERE p_tenant = knowmind_current_tenant() AND l.tenant_id = p_tenant
              AND lower(l.lexeme) % q.w AND l.lexeme <> q.w
              AND similarity(l.lexeme, q.w) >= p_threshold
            ORDER BY sim DESC, l.df DESC, l.lexeme LIMIT p_per_word) AS m
        $$
        """
    )
    # the session's entity names similar to each query (``%``) or containing it as a word
    # (``<%``), best first by the larger of the two, at most p_per_query each
    op.execute(
        f"""
        CREATE FUNCTION knowmind_similar_names(p_tenant uuid, p_queries text[], p_per_query int)
        RETURNS TABLE (query text, entity_id uuid, norm_name text, score real) {_OWNER_RUN}
        AS $$
          SELECT q.q, m.entity_id, m.norm_name, m.score FROM unnest(p_queries) AS q(q)
          CROSS JOIN LATERAL (
            SELECT n.entity_id, n.norm_name,
                   greatest(similarity(n.norm_name, q.q), word_similarity(q.q, n.norm_name))
                     AS score
            FROM entity_names n
            WHERE p_tenant = knowmind_current_tenant() AND n.tenant_id = p_tenant
              AND (n.norm_name % q.q OR q.q <% n.norm_name)
            ORDER BY score DESC, n.norm_name LIMIT p_per_query) AS m
        $$
        """
    )
    for signature in _SIGNATURES:
        op.execute(f"REVOKE ALL ON FUNCTION {signature} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {signature} TO knowmind_app")


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {_SIGNATURES[1]}")
    op.execute(f"DROP FUNCTION IF EXISTS {_SIGNATURES[0]}")
    op.execute("CREATE INDEX entity_names_trgm ON entity_names USING gin (norm_name gin_trgm_ops)")
    op.execute(
        "CREATE INDEX entity_names_tenant_trgm ON entity_names "
        "USING gist (tenant_id, norm_name gist_trgm_ops)"
    )
    op.execute("DROP INDEX IF EXISTS entity_names_tenant_gin")
    op.execute(
        "CREATE INDEX bm25_lexemes_trgm ON bm25_lexemes "
        "USING gist (tenant_id, lower(lexeme) gist_trgm_ops)"
    )
    op.execute("DROP INDEX IF EXISTS bm25_lexemes_tenant_trgm")
