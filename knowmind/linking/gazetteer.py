"""Gazetteer: find every known entity name or alias of the tenant in a text.

Scaling: we never load the tenant's names. The text's word n-grams (up to ``MAX_NGRAM`` tokens,
plus a variant without a German genitive -s) are normalised exactly like entity names and looked
up in one query against the ``(tenant_id, norm_name)`` btree of ``entity_names``. The work is
O(text length × MAX_NGRAM) index probes, independent of how many entities a tenant has — 100k
entities cost the same as ten.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.linking.names import tokens
from knowmind.store.entities import lookup_names

__all__ = ["MAX_NGRAM", "GazetteerHit", "find_known_entities", "ngrams"]

MAX_NGRAM = 6  # the longest name looked up, in words
MIN_CHARS = 2  # an n-gram of fewer characters is never looked up


@dataclass(frozen=True, slots=True)
class GazetteerHit:
    """A known entity named in the text, first at ``text[start:end]``."""

    entity_id: UUID
    start: int
    end: int


def ngrams(text: str) -> dict[str, tuple[int, int]]:
    """{normalised n-gram: (start, end) of its first occurrence}."""
    toks = list(tokens(text))
    found: dict[str, tuple[int, int]] = {}
    for i in range(len(toks)):
        for n in range(1, MAX_NGRAM + 1):
            window = toks[i : i + n]
            if len(window) < n:
                break
            gram = " ".join(t for t, _, _ in window)
            span = (window[0][1], window[-1][2])
            if len(gram) >= MIN_CHARS:
                found.setdefault(gram, span)
            last = window[-1][0]
            if len(last) > 3 and last.endswith("s"):  # "Muster GmbHs", "Anna Meiers"
                found.setdefault(gram[:-1], (span[0], span[1] - 1))
    return found


async def find_known_entities(
    conn: AsyncConnection, tenant_id: UUID, text: str
) -> list[GazetteerHit]:
    grams = ngrams(text)
    matches = await lookup_names(conn, tenant_id, list(grams))
    hits: dict[UUID, GazetteerHit] = {}
    for gram, entities in matches.items():
        start, end = grams[gram]
        for entity_id, _ in entities:
            current = hits.get(entity_id)
            if current is None or start < current.start:
                hits[entity_id] = GazetteerHit(entity_id, start, end)
    return sorted(hits.values(), key=lambda h: h.start)
