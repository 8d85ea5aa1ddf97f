"""German compounds, split with the tenant's own vocabulary (no dictionary to ship): a query
lexeme made of two vocabulary lexemes also searches its parts ("projektleiterin" → "projekt",
"leiterin"), and a query lexeme also searches the tenant's compounds made of it and another
vocabulary or query lexeme ("leiterin" → "projektleiterin"), so both directions meet at query
time. (The German snowball stemmer cuts "-erin": the lexemes are "projektleit", "leit".)"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from uuid import UUID

from knowmind.store import lexical
from knowmind.store.sql import Conn

__all__ = ["MIN_PART", "compound_expansions"]

# Parts have at least this many letters (shorter ones are mostly suffixes, not words).
MIN_PART = 4
# Compounds of a query lexeme searched, commonest first.
COMPOUNDS_PER_TERM = 3
LINKING = ("", "s")


def _splits(word: str) -> Iterator[tuple[str, str]]:
    """(modifier, head) candidates of a word, a linking ``s`` dropped from the modifier."""
    for cut in range(MIN_PART, len(word) - MIN_PART + 1):
        modifier, head = word[:cut], word[cut:]
        yield modifier, head
        if modifier.endswith("s") and len(modifier) > MIN_PART:
            yield modifier[:-1], head


def _rests(word: str, compound: str) -> list[str]:
    """What is left of ``compound`` around ``word`` (with and without a linking ``s``)."""
    rests = []
    if compound.startswith(word):
        rest = compound[len(word) :]
        rests += [rest] + ([rest[1:]] if rest.startswith("s") else [])
    if compound.endswith(word):
        rest = compound[: -len(word)]
        rests += [rest] + ([rest[:-1]] if rest.endswith("s") else [])
    return [r for r in rests if len(r) >= MIN_PART]


async def compound_expansions(
    conn: Conn, tenant_id: UUID, words: Sequence[str]
) -> dict[str, list[tuple[str, int]]]:
    """{query lexeme: [(vocabulary lexeme, df), …]}: its parts and its compounds."""
    words = [w for w in words if len(w) >= MIN_PART]
    extending = await lexical.lexemes_extending(conn, tenant_id, words, MIN_PART)
    split_words = {w: list(_splits(w)) for w in words if len(w) >= 2 * MIN_PART}
    lookups = {p for splits in split_words.values() for split in splits for p in split}
    lookups |= {r for w, found in extending.items() for c, _ in found for r in _rests(w, c)}
    known = await lexical.lexeme_dfs(conn, tenant_id, sorted(lookups))
    expansions: dict[str, list[tuple[str, int]]] = {}
    for word, splits in split_words.items():
        valid = [(m, h) for m, h in splits if m in known and h in known]
        if valid:  # the split whose rarer part is commonest, the longer head on ties
            m, h = max(valid, key=lambda s: (min(known[s[0]], known[s[1]]), len(s[1])))
            expansions[word] = [(m, known[m]), (h, known[h])]
    parts = set(known) | set(words)  # "Leiterin des Projekts": the other part is in the query
    for word, found in extending.items():
        compounds = [(c, df) for c, df in found if any(r in parts for r in _rests(word, c))]
        compounds.sort(key=lambda c: (-c[1], c[0]))
        if compounds:
            expansions.setdefault(word, []).extend(compounds[:COMPOUNDS_PER_TERM])
    return expansions
