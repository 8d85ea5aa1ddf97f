"""Lexical stage ``bm25``: Okapi BM25 over the tenant's text-search lexemes (PostgreSQL inverted
index with exact corpus statistics), tolerant of typos, German compounds and questions asked
in another language than the tenant's."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from knowmind.models.language import LanguageDetector
from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.recall.compounds import compound_expansions
from knowmind.store import lexical
from knowmind.store.lexical import CorpusStats, ScoredTerm
from knowmind.store.sql import Conn

__all__ = ["LexicalOptions", "OkapiBM25Stage"]

# Web-search syntax: the hits must also match ``websearch_to_tsquery`` of the query.
_WEBSEARCH_MARKERS = ('"', " -", " or ", " OR ")
# A correction must be this similar (pg_trgm) to the unknown query lexeme.
TYPO_SIMILARITY = 0.45
# Shorter lexemes are not corrected (too few trigrams to tell a typo from another word).
TYPO_MIN_LENGTH = 4
# An expansion (compound or its part) counts this much of a query term.
EXPANSION_WEIGHT = 0.5


@dataclass(frozen=True, slots=True)
class LexicalOptions:
    k1: float = 1.2
    b: float = 0.75
    postings_budget: int = 2000
    typos: bool = True
    compounds: bool = True
    query_language: bool = True


@dataclass(slots=True)
class _Analysis:
    terms: list[ScoredTerm]
    stats: CorpusStats
    query_terms: int
    matched: int
    corrections: dict[str, list[str]]
    compounds: dict[str, list[str]]


class OkapiBM25Stage:
    name = "bm25"

    def __init__(
        self, options: LexicalOptions | None = None, detector: LanguageDetector | None = None
    ) -> None:
        self.options = options or LexicalOptions()
        self.detector = detector

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        detected = self._query_language(query.text)
        languages = [query.language]
        if detected is not None and detected != query.language:
            languages.append(detected)
        # the scoring statement's plan depends on the tenant's size: a session planning each
        async with ctx.db.read(query.tenant, custom_plans=True) as conn:
            analysis = await self._analyse(conn, query, languages)
            request = lexical.BM25Request(
                query.tenant,
                analysis.terms,
                analysis.stats,
                query.filters,
                query.candidates,
                k1=self.options.k1,
                b=self.options.b,
                budget=self.options.postings_budget,
                websearch=(query.language, query.text) if _websearch(query.text) else None,
            )
            rows = await lexical.bm25_candidates(conn, request)
        candidates = [Candidate(chunk_id, memory_id, s) for chunk_id, memory_id, s in rows]
        ctx.signals[self.name] = _signals(analysis, candidates, query.language, detected)
        ctx.query_lexemes = {
            t.lexeme: t.weight * lexical.idf(analysis.stats.chunk_count, t.df)
            for t in analysis.terms
            if t.df > 0
        }
        ctx.question_language = detected
        ctx.explain["bm25_corrections"] = analysis.corrections
        if analysis.compounds:
            ctx.explain["bm25_compounds"] = analysis.compounds
        ctx.explain["bm25_languages"] = languages
        return candidates

    def _query_language(self, text: str) -> str | None:
        if not self.options.query_language or self.detector is None:
            return None
        return self.detector.detect(text)

    async def _analyse(
        self, conn: Conn, query: RecallRequest, languages: Sequence[str]
    ) -> _Analysis:
        """The query's lexemes with their df, plus compound parts and typo corrections.
        Compounds come first: a word that splits is no typo. (All on the one connection the
        stage holds: a second one from the same pool could wait forever under load.)"""
        # a question in another language than the tenant's: its own stopwords are dropped
        own = languages[-1] if len(languages) > 1 else None
        dfs, positions, stats = await lexical.analyse_query(
            conn, query.tenant, languages, query.text, stopwords_of=own
        )
        terms = [ScoredTerm(lexeme, df) for lexeme, df in dfs.items()]
        compounds: dict[str, list[str]] = {}
        if self.options.compounds and "german" in languages:
            expanded = await compound_expansions(conn, query.tenant, list(dfs))
            for word, expansions in expanded.items():
                terms += [ScoredTerm(w, df, EXPANSION_WEIGHT) for w, df in expansions]
                compounds[word] = [w for w, _ in expansions]
        corrections: dict[str, list[str]] = {}
        unknown = [w for w in _unknown_words(dfs, positions) if w not in compounds]
        if self.options.typos and unknown:
            similar = await lexical.similar_lexemes(
                conn, query.tenant, unknown, TYPO_SIMILARITY, per_term=2
            )
            corrections = _corrections(similar, terms)
        matched = sum(1 for w, df in dfs.items() if df > 0 or w in corrections or w in compounds)
        return _Analysis(_merge(terms), stats, len(dfs), matched, corrections, compounds)


def _unknown_words(dfs: dict[str, int], positions: dict[str, int]) -> list[str]:
    """Typo candidates: a word is unknown when none of its analyses (one per language) is in
    the vocabulary ("president" → german "presid" is no typo when english "president" is)."""
    known_words = {positions[w] for w, df in dfs.items() if df > 0}
    return [
        w
        for w, df in dfs.items()
        if df == 0 and len(w) >= TYPO_MIN_LENGTH and positions[w] not in known_words
    ]


def _corrections(
    similar: dict[str, list[tuple[str, float, int]]], terms: list[ScoredTerm]
) -> dict[str, list[str]]:
    """{unknown lexeme: its closest vocabulary lexemes}, added to ``terms`` (two equally
    close corrections share the weight of the word)."""
    corrections = {}
    for lexeme, found in similar.items():
        best = found[0][1]
        chosen = [(w, df) for w, sim, df in found if sim >= best - 0.05]
        corrections[lexeme] = [w for w, _ in chosen]
        terms += [ScoredTerm(w, df, 1.0 / len(chosen)) for w, df in chosen]
    return corrections


def _websearch(text: str) -> bool:
    """Whether the query uses web-search syntax on purpose (a phrase, -word, or)."""
    padded = f" {text} "
    return any(marker in padded for marker in _WEBSEARCH_MARKERS)


def _merge(terms: list[ScoredTerm]) -> list[ScoredTerm]:
    """One term per lexeme, with the largest weight any source gave it."""
    best: dict[str, ScoredTerm] = {}
    for term in terms:
        if term.lexeme not in best or term.weight > best[term.lexeme].weight:
            best[term.lexeme] = term
    return list(best.values())


def _signals(
    analysis: _Analysis, candidates: list[Candidate], language: str, detected: str | None
) -> dict[str, float]:
    top = candidates[0].score if candidates else 0.0
    second = candidates[1].score if len(candidates) > 1 else 0.0
    return {
        "query_terms": float(analysis.query_terms),
        "matched_share": analysis.matched / analysis.query_terms if analysis.query_terms else 0.0,
        "corrected": float(len(analysis.corrections)),
        "top_score": top,
        "score_gap": (top - second) / top if len(candidates) > 1 and top > 0 else 0.0,
        "language_match": 1.0 if detected in (None, language) or language == "simple" else 0.0,
        "hits": float(len(candidates)),
    }
