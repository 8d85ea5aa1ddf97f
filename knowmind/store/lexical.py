"""Okapi BM25 over the inverted index ``chunk_terms`` (migration 0004), with exact per-tenant
statistics: query analysis, vocabulary look-ups (typos, compounds) and bounded scoring."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal
from uuid import UUID

from knowmind.store.search import MemoryFilters
from knowmind.store.sql import Conn, fetch

__all__ = [
    "BM25Request",
    "CorpusStats",
    "ScoredTerm",
    "analyse_query",
    "analysis_plan",
    "bm25_candidates",
    "bm25_plan",
    "idf",
    "lexeme_dfs",
    "lexemes_extending",
    "similar_lexemes",
]


@dataclass(frozen=True, slots=True)
class CorpusStats:
    chunk_count: int
    total_length: int

    @property
    def avgdl(self) -> float:
        return self.total_length / self.chunk_count if self.chunk_count else 0.0


@dataclass(frozen=True, slots=True)
class ScoredTerm:
    """A lexeme the query scores with: its df and a weight multiplying its idf (1 for a query
    term, less for an expansion such as a typo correction or a compound part)."""

    lexeme: str
    df: int
    weight: float = 1.0


def idf(chunk_count: int, df: int) -> float:
    """Lucene's BM25 idf, never negative."""
    return math.log(1 + (chunk_count - df + 0.5) / (df + 0.5))


# The query's lexemes in every analysis (the union; words dropped as stopwords of ``own`` are
# dropped from all), each with its df, beside the tenant's corpus statistics.
_ANALYSIS = (
    "WITH a AS (SELECT cfg, w.lexeme, p FROM "
    "unnest(CAST(:languages AS regconfig[])) AS cfg, "
    "unnest(to_tsvector(cfg, :query)) AS w, unnest(w.positions) AS p), "
    "q AS (SELECT lexeme, min(p) AS pos FROM a WHERE CAST(:own AS text) IS NULL "
    "OR p IN (SELECT p FROM a WHERE cfg = CAST(CAST(:own AS text) AS regconfig)) "
    "GROUP BY lexeme), "
    "s AS (SELECT chunk_count, total_length FROM bm25_corpus WHERE tenant_id = :t) "
    # a look-up per query lexeme (a scalar subquery is never turned into a join: as one, the
    # planner hashed the tenant's whole vocabulary for a handful of lexemes)
    "SELECT q.lexeme, coalesce((SELECT l.df FROM bm25_lexemes l WHERE l.tenant_id = :t "
    "AND l.lexeme = q.lexeme), 0), s.chunk_count, s.total_length, q.pos "
    "FROM (SELECT 1) AS one LEFT JOIN s ON true LEFT JOIN q ON true "
    "ORDER BY q.pos, q.lexeme"
)


def _analysis_params(
    tenant_id: UUID, languages: Sequence[str], query: str, stopwords_of: str | None
) -> dict[str, Any]:
    return {"t": tenant_id, "languages": list(languages), "query": query, "own": stopwords_of}


async def analyse_query(
    conn: Conn,
    tenant_id: UUID,
    languages: Sequence[str],
    query: str,
    stopwords_of: str | None = None,
) -> tuple[dict[str, int], dict[str, int], CorpusStats]:
    """{lexeme: df} of the query analysed with each text-search configuration in
    ``languages`` (the union), in the order the words appear in the query; {lexeme: position of
    its word in the query} (the analyses of one word in several languages share it); and the
    tenant's corpus statistics (one round trip).

    ``stopwords_of``: one of ``languages``, the query's own: a word it drops as a stopword is
    dropped from every analysis (an English "the" analysed as German is no content word)."""
    params = _analysis_params(tenant_id, languages, query, stopwords_of)
    rows = await fetch(conn, _ANALYSIS, params)
    stats = CorpusStats(int(rows[0][2] or 0), int(rows[0][3] or 0))
    dfs = {r[0]: int(r[1]) for r in rows if r[0] is not None}
    return dfs, {r[0]: int(r[4]) for r in rows if r[0] is not None}, stats


async def analysis_plan(conn: Conn, tenant_id: UUID, languages: Sequence[str], query: str) -> str:
    """The executed plan of ``analyse_query``'s statement, for checks."""
    params = _analysis_params(tenant_id, languages, query, None)
    return await _executed_plan(conn, _ANALYSIS, params)


async def _executed_plan(
    conn: Conn, sql: str, params: dict[str, Any], *, replan: bool = False
) -> str:
    """``EXPLAIN (ANALYZE, COSTS OFF)`` of the statement, as text."""
    rows = await fetch(conn, f"EXPLAIN (ANALYZE, COSTS OFF) {sql}", params, replan=replan)
    return "\n".join(r[0] for r in rows)


async def similar_lexemes(
    conn: Conn, tenant_id: UUID, lexemes: Sequence[str], threshold: float, per_term: int
) -> dict[str, list[tuple[str, float, int]]]:
    """{lexeme: [(vocabulary lexeme, trigram similarity, df), …]} best first (ties: higher df),
    at most ``per_term`` each, similarity ≥ ``threshold`` (``knowmind_similar_lexemes``,
    migration 0006: a tenant-led GIN index scan, answering for the session's tenant only)."""
    if not lexemes:
        return {}
    rows = await fetch(
        conn,
        "SELECT word, lexeme, similarity, df FROM knowmind_similar_lexemes("
        "CAST(:t AS uuid), CAST(:lexemes AS text[]), CAST(:threshold AS real), CAST(:n AS int))",
        {"t": tenant_id, "lexemes": list(lexemes), "threshold": threshold, "n": per_term},
    )
    found: dict[str, list[tuple[str, float, int]]] = {}
    for query_lexeme, lexeme, sim, df in rows:
        found.setdefault(query_lexeme, []).append((lexeme, float(sim), int(df)))
    return found


async def lexeme_dfs(conn: Conn, tenant_id: UUID, words: Sequence[str]) -> dict[str, int]:
    """{word: df} of the words that are in the tenant's vocabulary."""
    if not words:
        return {}
    rows = await fetch(
        conn,
        (
            "SELECT lexeme, df FROM bm25_lexemes WHERE tenant_id = :t "
            "AND lexeme = ANY(CAST(:words AS text[]))"
        ),
        {"t": tenant_id, "words": sorted(set(words))},
    )
    return {r[0]: int(r[1]) for r in rows}


async def lexemes_extending(
    conn: Conn, tenant_id: UUID, lexemes: Sequence[str], min_extra: int
) -> dict[str, list[tuple[str, int]]]:
    """{lexeme: [(vocabulary lexeme, df), …]}: the tenant's lexemes that start or end with the
    lexeme and are at least ``min_extra`` letters longer (prefix and suffix range scans)."""
    if not lexemes:
        return {}
    rows = await fetch(
        conn,
        (
            "SELECT q.lexeme, x.lexeme, x.df FROM unnest(CAST(:lexemes AS text[])) AS q(lexeme) "
            "CROSS JOIN LATERAL (SELECT l.lexeme, l.df FROM bm25_lexemes l "
            " WHERE l.tenant_id = :t AND l.lexeme > q.lexeme "
            ' AND l.lexeme < q.lexeme || chr(1114111) COLLATE "C" '
            " UNION SELECT l.lexeme, l.df FROM bm25_lexemes l WHERE l.tenant_id = :t"
            " AND l.reversed > reverse(q.lexeme)"
            ' AND l.reversed < reverse(q.lexeme) || chr(1114111) COLLATE "C") x '
            "WHERE length(x.lexeme) >= length(q.lexeme) + :m"
        ),
        {"t": tenant_id, "lexemes": list(lexemes), "m": min_extra},
    )
    found: dict[str, list[tuple[str, int]]] = {}
    for query_lexeme, lexeme, df in rows:
        found.setdefault(query_lexeme, []).append((lexeme, int(df)))
    return found


# How many of the best chunks by their partially read postings are scored exactly, per chunk
# of the shortlist: their rank by the partial score is already close to the exact one.
RESCORE_FACTOR = 1


# how a chunk row ``c`` matches the web-search form of the query
_WEBSEARCH_MATCH = "c.tsv @@ websearch_to_tsquery(CAST(:ws_language AS regconfig), :ws_query)"
# ``bounded``: the best postings of each term, then exact scores of the best chunks by them;
# ``exhaustive``: every posting of every term; ``matching``: the chunks matching the web-search
# query, scored exactly (what ``exhaustive`` then filters to, without reading every posting)
_Mode = Literal["bounded", "exhaustive", "matching"]


def posting_depths(terms: Sequence[ScoredTerm], budget: int, floor: int) -> list[int]:
    """How many postings to read per term (in ``terms`` order): the rarest terms first, each
    all of its postings up to an equal share of what is left of ``budget`` (at least
    ``floor``). A term read to its df is scored exactly from its postings."""
    depths = [0] * len(terms)
    remaining = budget
    order = sorted(range(len(terms)), key=lambda i: (terms[i].df, terms[i].lexeme))
    for left, i in enumerate(order):
        share = max(floor, remaining // (len(order) - left))
        depths[i] = min(terms[i].df, share)
        remaining = max(0, remaining - depths[i])
    return depths


def _posting_score(term_weight: str) -> str:
    """BM25 of a posting ``t`` (its tf and chunk length) for a term weighing ``term_weight``
    (its idf times its weight in the query), ``p`` holding k1, b and the mean chunk length."""
    return (
        f"{term_weight} * t.tf * (p.k1 + 1) / (t.tf + p.k1 * (1 - p.b + p.b * t.doc_len / p.avgdl))"
    )


def _bm25_sql(where: str, mode: _Mode) -> str:
    weight = _posting_score("q.weight")
    if mode == "matching":
        # the chunks matching the web-search query (GIN index), each term's posting probed
        # (an owner-run function: under row-level security ``@@`` cannot use the GIN index)
        scored = (
            "WITH w AS MATERIALIZED (SELECT id FROM knowmind_websearch_chunks(:tenant, "
            "CAST(:ws_language AS regconfig), :ws_query)) "
            f"SELECT t.chunk_id, sum({weight}) AS score FROM w CROSS JOIN q CROSS JOIN p "
            "JOIN chunk_terms t ON t.tenant_id = :tenant AND t.lexeme = q.lexeme "
            "AND t.chunk_id = w.id GROUP BY t.chunk_id"
        )
    elif mode == "exhaustive":
        scored = (
            f"SELECT t.chunk_id, sum({weight}) AS score FROM q CROSS JOIN p JOIN chunk_terms t "
            "ON t.tenant_id = :tenant AND t.lexeme = q.lexeme GROUP BY t.chunk_id"
        )
    else:
        scored = (
            "WITH post AS MATERIALIZED (SELECT q.lexeme, p.chunk_id, p.tf, p.doc_len FROM q "
            "CROSS JOIN LATERAL (SELECT t.chunk_id, t.tf, t.doc_len FROM chunk_terms t "
            "WHERE t.tenant_id = :tenant AND t.lexeme = q.lexeme "
            "ORDER BY t.impact DESC LIMIT q.depth) p), "
            # the best chunks by what was read (a lower bound of their score) are rescored
            # exactly: the terms read to their df count as read (``complete``), and each term
            # read only in part is looked up per candidate (index probes; OFFSET 0 keeps the
            # planner from hashing all of a frequent term's postings). No join of candidates
            # with postings: misjudging both as a few rows, the planner compared every pair.
            f"cand AS MATERIALIZED (SELECT t.chunk_id, sum({weight}) AS partial, "
            f"sum({weight}) FILTER (WHERE q.depth >= q.df) AS complete FROM post t "
            "JOIN q USING (lexeme) CROSS JOIN p GROUP BY t.chunk_id "
            "ORDER BY partial DESC, t.chunk_id LIMIT :rescore) "
            "SELECT chunk_id, sum(part) AS score FROM ("
            "SELECT chunk_id, complete AS part FROM cand WHERE complete IS NOT NULL "
            f"UNION ALL SELECT cand.chunk_id, {_posting_score('t.weight')} "
            "FROM cand CROSS JOIN LATERAL (SELECT q.weight, t.tf, t.doc_len FROM q "
            "JOIN chunk_terms t ON t.tenant_id = :tenant AND t.lexeme = q.lexeme "
            "AND t.chunk_id = cand.chunk_id WHERE q.depth < q.df OFFSET 0) t CROSS JOIN p"
            ") AS parts GROUP BY chunk_id"
        )
    return (
        "WITH q AS MATERIALIZED (SELECT * FROM unnest(CAST(:lexemes AS text[]), "
        "CAST(:weights AS float8[]), CAST(:dfs AS int[]), CAST(:depths AS int[])) "
        "AS q(lexeme, weight, df, depth)), "
        "p AS (SELECT CAST(:k1 AS float8) AS k1, CAST(:b AS float8) AS b, "
        "CAST(:avgdl AS float8) AS avgdl), "
        f"scored AS MATERIALIZED ({scored} ORDER BY score DESC, chunk_id LIMIT :shortlist) "
        "SELECT s.chunk_id, c.memory_id, s.score FROM scored s JOIN chunks c "
        "ON c.tenant_id = :tenant AND c.id = s.chunk_id JOIN memories m "
        f"ON m.tenant_id = c.tenant_id AND m.id = c.memory_id WHERE true{where} "
        "ORDER BY s.score DESC, s.chunk_id LIMIT :limit"
    )


@dataclass(frozen=True, slots=True)
class BM25Request:
    """One BM25 scoring: the query's terms, the corpus statistics, filters and parameters.
    ``websearch`` (language, query) keeps only chunks matching ``websearch_to_tsquery``."""

    tenant_id: UUID
    terms: Sequence[ScoredTerm]
    stats: CorpusStats
    filters: MemoryFilters
    limit: int
    k1: float
    b: float
    budget: int
    websearch: tuple[str, str] | None = None

    def statement(self, mode: _Mode = "bounded") -> tuple[str, dict[str, Any], bool]:
        """SQL, parameters, and whether some term's postings are read only in part."""
        if mode == "matching" and self.websearch is None:
            raise ValueError("the matching mode needs a web-search query")
        terms = [t for t in self.terms if t.df > 0]
        depths = posting_depths(terms, self.budget, floor=2 * self.limit)
        where, filter_params = self.filters.sql()
        if self.websearch is not None:
            where += f" AND {_WEBSEARCH_MATCH}"
            filter_params |= {"ws_language": self.websearch[0], "ws_query": self.websearch[1]}
        params: dict[str, Any] = {
            "tenant": self.tenant_id,
            "lexemes": [t.lexeme for t in terms],
            "weights": [t.weight * idf(self.stats.chunk_count, t.df) for t in terms],
            "dfs": [t.df for t in terms],
            "depths": depths,
            "k1": self.k1,
            "b": self.b,
            "avgdl": max(self.stats.avgdl, 1e-9),
            "limit": self.limit,
            "shortlist": 2 * self.limit + 20 if mode == "bounded" else 2**31 - 1,
            "rescore": RESCORE_FACTOR * (2 * self.limit + 20),
            **filter_params,
        }
        truncated = any(d < t.df for d, t in zip(depths, terms, strict=True))
        return _bm25_sql(where, mode), params, truncated or sum(depths) > params["shortlist"]


async def bm25_candidates(conn: Conn, request: BM25Request) -> list[tuple[UUID, UUID, float]]:
    """(chunk id, memory id, BM25 score), best first. Candidates come from the best postings
    of each term (bounded by ``budget``, rarest terms first) and are then scored exactly;
    when the filters leave fewer than ``limit`` of them, the filtered chunks are scored: the
    chunks matching a web-search query (through the full-text index), else every posting."""
    if not any(t.df > 0 for t in request.terms) or request.stats.chunk_count == 0:
        return []
    sql, params, partial = request.statement()
    rows = await fetch(conn, sql, params, replan=True)
    if len(rows) < request.limit and partial:
        sql, params, _ = request.statement(
            "exhaustive" if request.websearch is None else "matching"
        )
        rows = await fetch(conn, sql, params, replan=True)
    return [(r[0], r[1], float(r[2])) for r in rows]


async def bm25_plan(conn: Conn, request: BM25Request) -> str:
    """The executed plan of the bounded BM25 statement (EXPLAIN ANALYZE), for checks."""
    sql, params, _ = request.statement()
    return await _executed_plan(conn, sql, params, replan=True)
