"""Trigram look-ups are planned with what a trigram comparison costs.

pg_trgm's operators (``%``, ``<%``) are costed like any operator, ``cpu_operator_cost`` (0.0025,
about an integer comparison), while one comparison computes the trigrams of a name or lexeme:
≈ 6 µs on this host. So reading every row of the tenant through a tenant-only index (the B-tree
``entity_names_lookup``, the primary key of ``bm25_lexemes``, or the tenant column of the
trigram GIN index) and comparing each looked about as cheap as reading the trigram postings,
and which one the planner chose turned on the sampled statistics, changing from one
``ANALYZE`` to the next. With the tenant-only plan, a DBpedia
tenant of 16k entity names took ≈ 95 ms a phrase instead of ≈ 4 ms, and every recall whose
question names something waited 80–330 ms for its entity matching.

Raising the operators' cost does not tell the plans apart: the GIN estimate charges it for every
posting it reads too, the tenant's included. What differs is the rows each plan hands to the
comparison: all of the tenant's, or the few whose trigrams match. Inside the two look-up
functions a row is therefore costed at 1.0 (``cpu_tuple_cost``, default 0.01), what comparing
it costs against reading a posting (≈ 6 µs against ≈ 0.3 µs here): the tenant-only plan then
costs ≈ 4 × the trigram plan at any tenant size (both grow with the tenant's rows), and the
planner keeps the trigram index's plans, choosing among them as before.
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_SIGNATURES = (
    "knowmind_similar_lexemes(uuid, text[], real, int)",
    "knowmind_similar_names(uuid, text[], int)",
)
ROW_COST = 1.0  # a row that reaches a trigram comparison


def upgrade() -> None:
    for signature in _SIGNATURES:
        op.execute(f"ALTER FUNCTION {signature} SET cpu_tuple_cost = {ROW_COST}")


def downgrade() -> None:
    for signature in _SIGNATURES:
        op.execute(f"ALTER FUNCTION {signature} RESET cpu_tuple_cost")
