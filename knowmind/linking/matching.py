"""Find the entities a question names: exact (normalised n-grams, as the gazetteer) and fuzzy
(trigram over names and aliases) for the phrases that look like names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.linking.gazetteer import ngrams
from knowmind.linking.names import normalise_name
from knowmind.store.entities import get_entity, lookup_names, search_entities

__all__ = ["MatchedEntity", "match_entities", "match_phrase"]

FUZZY_MIN_SCORE = 0.5
SINGLE_WORD_MIN_SCORE = 0.8
_CAPITALISED_RUN = re.compile(r"\b[A-ZÄÖÜ][\w.&-]*(?:\s+[A-ZÄÖÜ0-9][\w.&-]*)*")
# Capitalised words that start German questions but name nothing.
_QUESTION_WORDS = {
    "wer",
    "was",
    "wo",
    "wann",
    "wie",
    "welche",
    "welcher",
    "welches",
    "who",
    "what",
    "where",
    "when",
    "which",
    "how",
    "der",
    "die",
    "das",
    "the",
}


@dataclass(frozen=True, slots=True)
class MatchedEntity:
    id: UUID
    name: str
    entity_class: str
    score: float
    matched: str  # the normalised text that matched


async def match_phrase(
    conn: AsyncConnection,
    tenant_id: UUID,
    phrase: str,
    limit: int = 3,
    min_score: float = FUZZY_MIN_SCORE,
) -> list[MatchedEntity]:
    """Entities for one phrase: exact name/alias (also without a genitive -s), else fuzzy."""
    norm = normalise_name(phrase)
    if not norm:
        return []
    variants = [norm] + ([norm[:-1]] if norm.endswith("s") and len(norm) > 3 else [])
    exact = await lookup_names(conn, tenant_id, variants)
    found = [
        MatchedEntity(entity_id, "", cls, 1.0, variant)
        for variant in variants
        for entity_id, cls in exact.get(variant, [])
    ]
    if not found:
        found = [
            MatchedEntity(row.id, row.name, row.entity_class, float(row.score or 0), norm)
            for variant in variants
            for row in await search_entities(conn, tenant_id, variant, limit)
            if (row.score or 0) >= min_score
        ]
    return await _named(conn, tenant_id, _best_per_entity(found)[:limit])


async def match_entities(
    conn: AsyncConnection, tenant_id: UUID, question: str
) -> list[MatchedEntity]:
    """Every entity the question names: all exact n-gram hits, plus fuzzy matches for
    capitalised phrases that matched nothing exactly."""
    grams = ngrams(question)
    exact = await lookup_names(conn, tenant_id, list(grams))
    found = [
        MatchedEntity(entity_id, "", cls, 1.0, gram)
        for gram, entities in exact.items()
        for entity_id, cls in entities
    ]
    covered = " ".join(m.matched for m in found)
    for run in _CAPITALISED_RUN.findall(question):
        words = run.split()
        while words and words[0].lower() in _QUESTION_WORDS:
            words = words[1:]
        phrase = normalise_name(" ".join(words))
        if len(phrase) >= 3 and phrase not in covered:
            # German capitalises every noun: a lone capitalised word is rarely a name, so it
            # only counts when it is nearly exact (a typo), phrases of several words at 0.5
            single = " " not in phrase
            found += await match_phrase(
                conn,
                tenant_id,
                phrase,
                limit=2,
                min_score=SINGLE_WORD_MIN_SCORE if single else FUZZY_MIN_SCORE,
            )
    return await _named(conn, tenant_id, _best_per_entity(found))


def _best_per_entity(matches: list[MatchedEntity]) -> list[MatchedEntity]:
    best: dict[UUID, MatchedEntity] = {}
    for match in matches:
        if match.id not in best or match.score > best[match.id].score:
            best[match.id] = match
    return sorted(best.values(), key=lambda m: (-m.score, -len(m.matched)))


async def _named(
    conn: AsyncConnection, tenant_id: UUID, matches: list[MatchedEntity]
) -> list[MatchedEntity]:
    named = []
    for match in matches:
        if match.name:
            named.append(match)
            continue
        row = await get_entity(conn, tenant_id, match.id)
        if row is not None:
            named.append(
                MatchedEntity(match.id, row.name, row.entity_class, match.score, match.matched)
            )
    return named
