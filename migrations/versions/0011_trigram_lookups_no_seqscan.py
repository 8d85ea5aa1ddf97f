"""Trigram look-ups never scan the table.

0006 turned plain index scans off in the two trigram look-ups so the planner would intersect the
GIN posting lists, but left it the sequential scan: where ``entity_names`` is small (a server
with one large tenant: 1.6k names) the planner scans it and computes the trigrams of every name
for every phrase, ≈ 3 µs a name and phrase — 22 ms of a 100k-chunk tenant's recall (p50) against
1.4 ms through the index, and CPU taken from the other stages. With sequential scans off as well,
the bitmap scan of the tenant-led trigram index is the only plan left.
"""

from __future__ import annotations

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_SIGNATURES = (
    "knowmind_similar_lexemes(uuid, text[], real, int)",
    "knowmind_similar_names(uuid, text[], int)",
)


def upgrade() -> None:
    for signature in _SIGNATURES:
        op.execute(f"ALTER FUNCTION {signature} SET enable_seqscan = off")


def downgrade() -> None:
    for signature in _SIGNATURES:
        op.execute(f"ALTER FUNCTION {signature} RESET enable_seqscan")
