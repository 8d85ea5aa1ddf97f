"""Okapi BM25: an inverted index of the chunks' lexemes and exact per-tenant corpus statistics.

- ``chunk_terms``: one posting per (chunk, lexeme) with the term frequency, the chunk's length
  (both from the stored ``tsv``: positions per lexeme, length = Σ tf) and an ``impact`` (the
  BM25 term weight with k1 = 1.2, b = 0.75 and the tenant's average length when written) that
  orders each lexeme's postings, so a query reads the best postings of a term first.
- ``bm25_lexemes``: document frequency per lexeme (the tenant's vocabulary; trigram-indexed for
  typo correction). A lexeme whose df drops to 0 is deleted, so no erased word stays behind.
- ``bm25_corpus``: chunk count and total length per tenant.

Statement-level triggers on ``chunks`` (transition tables) keep all three exact in the writing
transaction. Every trigger first updates the tenant's ``bm25_corpus`` row, which serialises the
chunk writes of one tenant, so concurrent writers never lock lexeme rows in opposite orders.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TENANT_TABLES = ("chunk_terms", "bm25_lexemes", "bm25_corpus")

# Impact ordering of postings: the BM25 tf part with the default parameters.
_IMPACT = "p.tf * 2.2 / (p.tf + 1.2 * (0.25 + 0.75 * p.doc_len / greatest(s.avgdl, 1)))"


def _terms(source: str) -> str:
    """(tenant_id, chunk_id, lexeme, tf, doc_len) of the chunks in ``source``."""
    return f"""
      SELECT x.tenant_id, x.chunk_id, x.lexeme, x.tf,
             sum(x.tf) OVER (PARTITION BY x.tenant_id, x.chunk_id)::integer AS doc_len
      FROM (SELECT s.tenant_id, s.id AS chunk_id, u.lexeme,
                   coalesce(cardinality(u.positions), 1) AS tf
            FROM {source} s, unnest(s.tsv) u) x"""


def _lengths(source: str) -> str:
    """(tenant_id, chunks, length) summed over the chunks in ``source``."""
    return f"""
      SELECT s.tenant_id, count(*) AS chunks,
             coalesce(sum((SELECT sum(coalesce(cardinality(u.positions), 1))
                           FROM unnest(s.tsv) u)), 0) AS length
      FROM {source} s GROUP BY s.tenant_id"""


def _add(source: str) -> str:
    return f"""
      INSERT INTO bm25_corpus AS c (tenant_id, chunk_count, total_length)
        SELECT tenant_id, chunks, length FROM ({_lengths(source)}) l ORDER BY tenant_id
      ON CONFLICT (tenant_id) DO UPDATE SET chunk_count = c.chunk_count + excluded.chunk_count,
        total_length = c.total_length + excluded.total_length;
      INSERT INTO bm25_lexemes AS l (tenant_id, lexeme, df)
        SELECT s.tenant_id, u.lexeme, count(*) FROM {source} s, unnest(s.tsv) u
        GROUP BY s.tenant_id, u.lexeme ORDER BY s.tenant_id, u.lexeme
      ON CONFLICT (tenant_id, lexeme) DO UPDATE SET df = l.df + excluded.df;
      INSERT INTO chunk_terms (tenant_id, lexeme, chunk_id, tf, doc_len, impact)
        SELECT p.tenant_id, p.lexeme, p.chunk_id, p.tf, p.doc_len, {_IMPACT}
        FROM ({_terms(source)}) p JOIN (SELECT tenant_id,
          total_length::float8 / greatest(chunk_count, 1) AS avgdl FROM bm25_corpus) s
          ON s.tenant_id = p.tenant_id;"""


def _remove(source: str) -> str:
    return f"""
      UPDATE bm25_corpus c SET chunk_count = c.chunk_count - l.chunks,
        total_length = c.total_length - l.length
        FROM ({_lengths(source)}) l WHERE c.tenant_id = l.tenant_id;
      PERFORM 1 FROM bm25_lexemes l WHERE (l.tenant_id, l.lexeme) IN
        (SELECT s.tenant_id, u.lexeme FROM {source} s, unnest(s.tsv) u)
        ORDER BY l.tenant_id, l.lexeme FOR UPDATE;
      WITH gone AS (SELECT s.tenant_id, u.lexeme, count(*) AS n
                    FROM {source} s, unnest(s.tsv) u GROUP BY s.tenant_id, u.lexeme),
        emptied AS (DELETE FROM bm25_lexemes l USING gone g
                    WHERE l.tenant_id = g.tenant_id AND l.lexeme = g.lexeme AND l.df <= g.n)
      UPDATE bm25_lexemes l SET df = l.df - g.n FROM gone g
        WHERE l.tenant_id = g.tenant_id AND l.lexeme = g.lexeme AND l.df > g.n;
      DELETE FROM chunk_terms t USING {source} s, unnest(s.tsv) u
        WHERE t.tenant_id = s.tenant_id AND t.lexeme = u.lexeme AND t.chunk_id = s.id;"""


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS btree_gist")
    op.execute(
        """
        CREATE TABLE bm25_corpus (
          tenant_id uuid PRIMARY KEY REFERENCES tenants (id) ON DELETE CASCADE,
          chunk_count bigint NOT NULL CHECK (chunk_count >= 0),
          total_length bigint NOT NULL CHECK (total_length >= 0)
        )
        """
    )
    op.execute(
        """
        CREATE TABLE bm25_lexemes (
          tenant_id uuid NOT NULL REFERENCES tenants (id) ON DELETE CASCADE,
          lexeme text COLLATE "C" NOT NULL,
          df integer NOT NULL CHECK (df > 0),
          -- for suffix look-ups (a column, not an expression index: under row-level security
          -- only leakproof operators on plain columns become index conditions)
          reversed text COLLATE "C" GENERATED ALWAYS AS (reverse(lexeme)) STORED,
          PRIMARY KEY (tenant_id, lexeme)
        )
        """
    )
    # Typo correction: nearest lexemes by trigram distance (KNN). Compound look-ups: lexemes
    # with a given prefix (the byte-ordered primary key) or suffix (reversed, byte-ordered).
    # (on lower(lexeme), lexemes being lower-case already, so that equality look-ups of a
    # lexeme keep to the primary key)
    op.execute(
        "CREATE INDEX bm25_lexemes_trgm ON bm25_lexemes "
        "USING gist (tenant_id, lower(lexeme) gist_trgm_ops)"
    )
    op.execute("CREATE INDEX bm25_lexemes_suffix ON bm25_lexemes (tenant_id, reversed)")
    # Postings are removed by the chunk triggers (no foreign key: it would cost one lookup per
    # posting on every insert).
    op.execute(
        """
        CREATE TABLE chunk_terms (
          tenant_id uuid NOT NULL,
          lexeme text COLLATE "C" NOT NULL,
          chunk_id uuid NOT NULL,
          tf integer NOT NULL CHECK (tf > 0),
          doc_len integer NOT NULL CHECK (doc_len > 0),
          impact real NOT NULL,
          PRIMARY KEY (tenant_id, lexeme, chunk_id)
        )
        """
    )
    op.execute(
        "CREATE INDEX chunk_terms_impact ON chunk_terms "
        "(tenant_id, lexeme, impact DESC) INCLUDE (chunk_id, tf, doc_len)"
    )
    for table in TENANT_TABLES:
        op.execute(f"ALTER TABLE {table} ENABLE ROW LEVEL SECURITY")
        op.execute(
            f"CREATE POLICY tenant_isolation ON {table} "
            "USING (tenant_id = knowmind_current_tenant()) "
            "WITH CHECK (tenant_id = knowmind_current_tenant())"
        )
        op.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON {table} TO knowmind_app")

    for event, body in (
        ("INSERT", _add("new_chunks")),
        ("DELETE", _remove("old_chunks")),
        (
            "UPDATE",
            _remove(
                "(SELECT o.* FROM old_chunks o JOIN new_chunks n USING (tenant_id, id) "
                "WHERE o.tsv IS DISTINCT FROM n.tsv)"
            )
            + _add(
                "(SELECT n.* FROM new_chunks n JOIN old_chunks o USING (tenant_id, id) "
                "WHERE o.tsv IS DISTINCT FROM n.tsv)"
            ),
        ),
    ):
        name = f"bm25_chunks_{event.lower()}"
        op.execute(
            f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$ "
            f"BEGIN {body} RETURN NULL; END $$"
        )
        tables = {
            "INSERT": "NEW TABLE AS new_chunks",
            "DELETE": "OLD TABLE AS old_chunks",
            "UPDATE": "OLD TABLE AS old_chunks NEW TABLE AS new_chunks",
        }[event]
        op.execute(
            f"CREATE TRIGGER {name} AFTER {event} ON chunks REFERENCING {tables} "
            f"FOR EACH STATEMENT EXECUTE FUNCTION {name}()"
        )
    _backfill()


def _backfill() -> None:
    """Index the chunks that exist (the owner bypasses row-level security)."""
    op.execute(f"DO $$ BEGIN {_add('(SELECT tenant_id, id, tsv FROM chunks)')} END $$")


def downgrade() -> None:
    for event in ("insert", "delete", "update"):
        op.execute(f"DROP TRIGGER IF EXISTS bm25_chunks_{event} ON chunks")
        op.execute(f"DROP FUNCTION IF EXISTS bm25_chunks_{event}()")
    for table in TENANT_TABLES:
        op.execute(f"DROP TABLE IF EXISTS {table}")
