"""Statements stage: the tenant's tagged statement chunks of the kinds a question asks about,
nearest to the question first.

knowmind's client adds to each upload short chunks it extracted from the user's own words,
tagged ``preference`` ("I prefer oat milk"), ``fact`` ("I work as a nurse in Leipzig") or
``update`` ("I moved to Hamburg"); they are stored with their kind (``chunks.kind``). A question
that asks about the user's likes, the user's own circumstances or what changed is answered
from those statements first: this stage ranks the statements of the kinds the question asks
about by cosine similarity (exact over the tagged rows: a few per document), and fusion weighs
it like any stage (the ranker reads its rank beside the others'), so a matching
statement lifts its memory and is the chunk the answer shows. A question that asks about none
of them leaves the stage out (no query is made; ``explain`` says which kinds were asked for).

The kinds are read off the question with a few words per kind, English and German: a
preference word, a first-person question (facts about the asker), a word of change or of the
present. They only decide which statements may compete; the embedding decides the ranking.
"""

from __future__ import annotations

import re

from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.store.vector_search import statement_candidates

__all__ = ["StatementStage", "statement_kinds"]

_PREFERENCE = re.compile(
    r"\b(prefer\w*|favou?rite\w*|like[sd]?|love[sd]?|enjoy\w*|hate[sd]?|dislike[sd]?|"
    r"avoid\w*|fancy|taste[sd]?|recommend\w*|suggest\w*|bevorzug\w*|lieblings\w*|mag|magst|"
    r"mögen|mochte|liebe|liebst|liebste\w*|lieber|gern|gerne|vorlieb\w*|hasse|hasst|meide|vermeide\w*|"
    r"empfiehl\w*|empfehl\w*|geschmack\w*)\b",
    re.IGNORECASE,
)
_FIRST_PERSON = re.compile(
    r"\b(i|me|my|mine|myself|i'm|i've|ich|mir|mich|mein|meine|meinem|meinen|meiner|meines)\b",
    re.IGNORECASE,
)
_CHANGE = re.compile(
    r"\b(now|currently|current|still|anymore|changed?|switch\w*|moved?|latest|recent\w*|"
    r"new|nowadays|these days|jetzt|inzwischen|mittlerweile|aktuell\w*|derzeit|noch|"
    r"gewechselt|umgezogen|gekündigt|neu\w*|zuletzt|nun)\b",
    re.IGNORECASE,
)


def statement_kinds(question: str) -> tuple[str, ...]:
    """The statement kinds ``question`` asks about (empty: none)."""
    kinds = []
    if _PREFERENCE.search(question):
        kinds.append("preference")
    if _FIRST_PERSON.search(question):
        kinds.append("fact")
    if _CHANGE.search(question):
        kinds.append("update")
    return tuple(kinds)


class StatementStage:
    name = "statements"

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        kinds = statement_kinds(query.text)
        if query.explain:
            ctx.explain["statement_kinds"] = list(kinds)
        if not kinds:
            return []
        embedding = await ctx.query_embedding()  # first: no connection held while it queues
        async with ctx.db.read(query.tenant) as conn:
            rows = await statement_candidates(
                conn, query.tenant, embedding, query.filters, kinds, query.candidates
            )
        return [Candidate(chunk_id, memory_id, score) for chunk_id, memory_id, score in rows]
