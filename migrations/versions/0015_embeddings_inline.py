"""Embeddings are stored in their row (``STORAGE PLAIN``), not in the table's TOAST relation.

pgvector's types default to ``EXTERNAL`` storage: once a row passes PostgreSQL's TOAST threshold
(≈ 2 KB), its largest values move out of line, and a 384-d ``vector`` (1,544 bytes) beside a
chunk's text and ``tsvector`` is one of them: 98 % of the 100k-chunk scale tenant's embeddings
lay in ``chunks``' TOAST relation. Every exact distance then fetches the vector back through the
TOAST index first: the exact path's distance and sort over 1,000 rows took 2.5 ms, against
0.65 ms with the vectors in their rows (measured on a copy of the scale tenant). The HNSW
paths' re-sort of their candidates pays the same per candidate.

With ``PLAIN`` the vector stays in the row; when the row is too large, its text and ``tsvector``
(``EXTENDED``: compressed, then moved out of line) make room instead. Recall reads neither but
the few returned chunks' text (the ``tsvector`` only for web-search matching, the GIN index
for the rest). A value of more than ``MAX_INLINE_BYTES`` (half a heap page: ``vector`` above
1,024 dimensions, ``halfvec`` above 2,048) keeps the default: its row could not always fit.

New and rewritten rows follow the new storage; rows written before this migration keep their
vectors out of line until the tables are rewritten (``VACUUM FULL chunks, summary_nodes``: an
exclusive lock and the indexes rebuilt, a maintenance window's job, not a migration's).
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

TABLES = ("chunks", "summary_nodes")  # both columns are of the type the schema records
ELEMENT_BYTES = {"vector": 4, "halfvec": 2}
MAX_INLINE_BYTES = 4096


def _vector_bytes() -> int:
    """The bytes of one embedding, from what ``knowmind_meta`` records of the schema's vectors
    (their dimension and type, both chosen when the schema was created)."""
    rows = op.get_bind().execute(
        text(
            "SELECT key, value FROM knowmind_meta"
            " WHERE key IN ('embedding_dim', 'embedding_storage')"
        )
    )
    meta = {str(key): str(value) for key, value in rows}
    return int(meta["embedding_dim"]) * ELEMENT_BYTES[meta["embedding_storage"]]


def upgrade() -> None:
    if _vector_bytes() <= MAX_INLINE_BYTES:
        for table in TABLES:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE PLAIN")


def downgrade() -> None:
    for table in TABLES:
        op.execute(f"ALTER TABLE {table} ALTER COLUMN embedding SET STORAGE EXTERNAL")
