"""Find the entities a question names: exact (normalised n-grams, as the gazetteer) and fuzzy
(trigram over names and aliases) for the phrases that look like names."""

from __future__ import annotations

import re
from dataclasses import dataclass
from uuid import UUID

from knowmind.linking.gazetteer import ngrams
from knowmind.linking.names import normalise_name
from knowmind.store.entities import entities_by_id, lookup_names, search_entities_many
from knowmind.store.sql import Conn

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


def _variants(norm: str) -> list[str]:
    """A normalised phrase and, for a genitive, the phrase without its -s."""
    return [norm] + ([norm[:-1]] if norm.endswith("s") and len(norm) > 3 else [])


async def match_phrase(
    conn: Conn,
    tenant_id: UUID,
    phrase: str,
    limit: int = 3,
    min_score: float = FUZZY_MIN_SCORE,
) -> list[MatchedEntity]:
    """Entities for one phrase: exact name/alias (also without a genitive -s), else fuzzy."""
    norm = normalise_name(phrase)
    if not norm:
        return []
    exact = await lookup_names(conn, tenant_id, _variants(norm))
    found = (await _match_phrases(conn, tenant_id, {norm: min_score}, exact, limit))[norm]
    return await _named(conn, tenant_id, found)


async def _match_phrases(
    conn: Conn,
    tenant_id: UUID,
    phrases: dict[str, float],
    exact: dict[str, list[tuple[UUID, str]]],
    limit: int,
) -> dict[str, list[MatchedEntity]]:
    """{normalised phrase: its best ``limit`` entities}: the exact hits among its variants
    (looked up by the caller in ``exact``), else fuzzy matches scoring at least the phrase's
    minimum — every fuzzy search in one statement. Exact hits still lack their names."""
    found: dict[str, list[MatchedEntity]] = {}
    fuzzy = []
    for norm in phrases:
        found[norm] = [
            MatchedEntity(entity_id, "", cls, 1.0, variant)
            for variant in _variants(norm)
            for entity_id, cls in exact.get(variant, [])
        ]
        if not found[norm]:
            fuzzy += _variants(norm)
    rows = await search_entities_many(conn, tenant_id, fuzzy, limit)
    for norm, min_score in phrases.items():
        if not found[norm]:
            found[norm] = [
                MatchedEntity(row.id, row.name, row.entity_class, float(row.score or 0), norm)
                for variant in _variants(norm)
                for row in rows.get(variant, [])
                if (row.score or 0) >= min_score
            ]
    return {norm: _best_per_entity(matches)[:limit] for norm, matches in found.items()}


async def match_entities(conn: Conn, tenant_id: UUID, question: str) -> list[MatchedEntity]:
    """Every entity the question names: all exact n-gram hits, plus fuzzy matches for
    capitalised phrases that matched nothing exactly (a few statements, not one per phrase)."""
    grams = ngrams(question)
    phrases = _name_phrases(question)
    variants = [v for phrase in phrases for v in _variants(phrase)]
    exact = await lookup_names(conn, tenant_id, list(dict.fromkeys([*grams, *variants])))
    found = [
        MatchedEntity(entity_id, "", cls, 1.0, gram)
        for gram in grams
        for entity_id, cls in exact.get(gram, [])
    ]
    covered = " ".join(m.matched for m in found)
    # German capitalises every noun: a lone capitalised word is rarely a name, so it only
    # counts when it is nearly exact (a typo), phrases of several words at 0.5
    wanted = {
        phrase: SINGLE_WORD_MIN_SCORE if " " not in phrase else FUZZY_MIN_SCORE
        for phrase in phrases
        if phrase not in covered
    }
    by_phrase = await _match_phrases(conn, tenant_id, wanted, exact, limit=2)
    found += [m for matches in by_phrase.values() for m in matches]
    return await _named(conn, tenant_id, _best_per_entity(found))


def _name_phrases(question: str) -> list[str]:
    """The normalised capitalised runs of the question (question words dropped), in order."""
    phrases = []
    for run in _CAPITALISED_RUN.findall(question):
        words = run.split()
        while words and words[0].lower() in _QUESTION_WORDS:
            words = words[1:]
        phrase = normalise_name(" ".join(words))
        if len(phrase) >= 3 and phrase not in phrases:
            phrases.append(phrase)
    return phrases


def _best_per_entity(matches: list[MatchedEntity]) -> list[MatchedEntity]:
    best: dict[UUID, MatchedEntity] = {}
    for match in matches:
        if match.id not in best or match.score > best[match.id].score:
            best[match.id] = match
    return sorted(best.values(), key=lambda m: (-m.score, -len(m.matched)))


async def _named(conn: Conn, tenant_id: UUID, matches: list[MatchedEntity]) -> list[MatchedEntity]:
    """The matches with their entities' names filled in (one look-up for all that lack one), in
    order; a match whose entity is gone is left out."""
    rows = await entities_by_id(conn, tenant_id, sorted({m.id for m in matches if not m.name}))
    named = []
    for match in matches:
        if match.name:
            named.append(match)
        elif (row := rows.get(match.id)) is not None:
            named.append(
                MatchedEntity(match.id, row.name, row.entity_class, match.score, match.matched)
            )
    return named
