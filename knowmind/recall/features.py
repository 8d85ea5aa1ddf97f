"""The ranker's features: what every stage found out about each candidate of the short list,
and what any candidate has whichever stage found it.

Pure: the pipeline gathers the inputs (stage rankings, stage signals and evidence, the
candidates' facts from the store, the question's entities and lexemes) and this module turns
them into one row of numbers per candidate. ``NaN`` means "not known" (a stage that did not find
the candidate, a question that names no entity): the ranker's trees treat it as missing, which
is different from zero. Nothing here depends on a dataset; every feature is one any tenant has.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from uuid import UUID

import numpy as np

from knowmind.linking.names import normalise_name
from knowmind.recall.timeframe import TimeWindow, mentions_time
from knowmind.store.candidates import CandidateFacts

__all__ = ["FEATURE_NAMES", "RankingInput", "feature_matrix"]

NAN = float("nan")
# Stages whose rank and relative score are features (a stage not listed adds nothing).
RANKED_STAGES = ("statements", "bm25", "vector", "graph", "identity", "relations", "time")
# Query-level signals the stages report (stage, signal) → feature name.
QUERY_SIGNALS = {
    ("bm25", "query_terms"): "q_terms",
    ("bm25", "matched_share"): "q_matched_share",
    ("bm25", "corrected"): "q_corrected",
    ("bm25", "language_match"): "q_language_match",
    ("vector", "top1"): "q_vector_top1",
    ("vector", "margin"): "q_vector_margin",
    ("graph", "named_entities"): "q_named_entities",
    ("graph", "entity_score"): "q_entity_score",
    ("identity", "intent_relation"): "q_intent_relation",
    ("relations", "paths"): "q_relation_paths",
}
# Per-candidate evidence a stage reports (stage, evidence) → feature name.
EVIDENCE = {
    ("relations", "path_hops"): "path_hops",
    ("relations", "path_match"): "path_match",
    ("relations", "path_final"): "path_final",
}
MEMORY_TYPES = {"semantic": 0.0, "episodic": 1.0, "procedural": 2.0, "reference": 3.0}
HIT_STAGES = ("bm25", "vector")
ENTITY_FEATURES = (
    "entity_overlap", "titled_entity", "title_overlap", "hit_links", "bridge", "entities",
)  # fmt: skip
TOP_HITS = 5  # the text stages' first hits whose entities count as the question's context
AGREEMENT_DEPTH = 10

FEATURE_NAMES: tuple[str, ...] = (
    *(f"{s}_rank" for s in RANKED_STAGES),
    *(f"{s}_score" for s in RANKED_STAGES),
    "rrf",
    "rrf_rank",
    "stages_found",
    "cosine",
    "cosine_gap",
    "sentence_cosine",
    "coverage",
    "coverage_gap",
    "coverage_plain",
    *ENTITY_FEATURES,
    "length",
    "language_same",
    "statement",
    "memory_type",
    "recency",
    "in_window",
    "window_distance",
    "dated",
    "states_time",
    "speaker_named",
    *EVIDENCE.values(),
    *QUERY_SIGNALS.values(),
    "q_words",
    "q_question",
    "q_agreement",
    "q_time",
    "q_when",
)
# A question (not a list of keywords) starts with one of these or ends with "?".
QUESTION_WORDS = frozenset((
    "who", "whom", "whose", "what", "which", "where", "when", "why", "how", "is", "are", "was",
    "were", "do", "does", "did", "can", "has", "have", "wer", "wen", "wem", "wessen", "was",
    "welche", "welcher", "welches", "welchen", "welchem", "wo", "wohin", "woher", "wann",
    "warum", "wieso", "weshalb", "wie", "wieviel", "wieviele", "ist", "sind", "hat", "haben",
    "gibt", "kann",
))  # fmt: skip


@dataclass(slots=True)
class RankingInput:
    """Everything the features are computed from, for one recall."""

    memories: Sequence[UUID]  # the short list, in fused order
    chunks: Mapping[UUID, UUID]  # memory id → the chunk shown for it
    rankings: Mapping[str, Sequence[tuple[UUID, float]]]  # each stage's memories, best first
    rrf: Mapping[UUID, float]
    facts: Mapping[UUID, CandidateFacts]  # by chunk id
    signals: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    evidence: Mapping[str, Mapping[UUID, Mapping[str, float]]] = field(default_factory=dict)
    query_lexemes: Mapping[str, float] = field(default_factory=dict)  # lexeme → idf
    query_entities: Mapping[UUID, str] = field(default_factory=dict)  # id → name
    # memory → {entity id: normalised name} of what it mentions (short list and first hits)
    memory_entities: Mapping[UUID, Mapping[UUID, str]] = field(default_factory=dict)
    question_language: str | None = None
    question_words: frozenset[str] = frozenset()  # the question's normalised words
    question_text: str = ""
    window: TimeWindow | None = None  # the event-time window the question names
    asks_when: bool = False


_COLUMN = {name: i for i, name in enumerate(FEATURE_NAMES)}


def feature_matrix(data: RankingInput) -> np.ndarray:
    """One row per short-listed memory, columns as ``FEATURE_NAMES``."""
    memories = data.memories
    out = np.full((len(memories), len(FEATURE_NAMES)), NAN)

    def put(name: str, values: Sequence[float] | np.ndarray | float) -> None:
        out[:, _COLUMN[name]] = values

    per_stage = _stage_positions(data.rankings)
    for stage in RANKED_STAGES:
        positions = per_stage.get(stage, {})
        put(f"{stage}_rank", [positions.get(m, (NAN, NAN))[0] for m in memories])
        put(f"{stage}_score", [positions.get(m, (NAN, NAN))[1] for m in memories])
    rrf_order = {m: i for i, m in enumerate(sorted(data.rrf, key=lambda m: -data.rrf[m]), 1)}
    put("rrf", [data.rrf.get(m, 0.0) for m in memories])
    put("rrf_rank", [float(rrf_order.get(m, len(rrf_order) + 1)) for m in memories])
    put("stages_found", [float(sum(m in p for p in per_stage.values())) for m in memories])
    facts = [data.facts.get(data.chunks[m]) for m in memories]
    cosines = np.array([NAN if f is None or f.cosine is None else f.cosine for f in facts])
    put("cosine", cosines)
    put("cosine_gap", cosines - _nanmax(cosines))
    # the question's best sentence in the chunk: a paragraph's one vector dilutes the sentence
    # a question is about (the chunk's cosine where it has no sentence vectors)
    put("sentence_cosine", [_sentence_cosine(f) for f in facts])
    coverages = np.array([_coverage(data.query_lexemes, f, weighted=True) for f in facts])
    put("coverage", coverages)
    put("coverage_gap", coverages - _nanmax(coverages))
    put("coverage_plain", [_coverage(data.query_lexemes, f, weighted=False) for f in facts])
    _entity_columns(data, facts, put)
    _chunk_columns(data, facts, put)
    ages = _recency(data)
    put("recency", [ages.get(m, NAN) for m in memories])
    _time_columns(data, facts, put)
    put("states_time", [NAN if f is None else float(mentions_time(f.chunk.content)) for f in facts])
    put("speaker_named", [_speaker_named(f, data.question_words) for f in facts])
    for (stage, key), name in EVIDENCE.items():
        found = data.evidence.get(stage, {})
        put(name, [float(found.get(m, {}).get(key, NAN)) for m in memories])
    for name, value in _query_row(data.signals).items():
        put(name, value)
    put("q_words", float(len(data.question_text.split())))
    put("q_question", float(_is_question(data.question_text)))
    put("q_agreement", _agreement(data.rankings))
    put("q_time", float(data.window is not None))
    put("q_when", float(data.asks_when))
    return out


def _time_columns(
    data: RankingInput,
    facts: Sequence[CandidateFacts | None],
    put: Callable[[str, Sequence[float]], None],
) -> None:
    """Whether each candidate happened in the question's window and how far off it lies (in
    window lengths; NaN without a window), and whether its event time was given."""
    window = data.window
    inside, distance, dated = [], [], []
    for fact in facts:
        if fact is None or fact.chunk.occurred_at is None:
            inside.append(NAN)
            distance.append(NAN)
            dated.append(NAN)
            continue
        occurred = fact.chunk.occurred_at
        dated.append(float(occurred != fact.chunk.created_at))
        if window is None:
            inside.append(NAN)
            distance.append(NAN)
            continue
        inside.append(float(window.start <= occurred < window.end))
        span = max((window.end - window.start).total_seconds(), 1.0)
        off = max(
            (window.start - occurred).total_seconds(), (occurred - window.end).total_seconds()
        )
        distance.append(max(0.0, off) / span)
    put("in_window", inside)
    put("window_distance", distance)
    put("dated", dated)


def _speaker_named(fact: CandidateFacts | None, question: frozenset[str]) -> float:
    """1 when the question names who said the memory (their name or first name), 0 when it
    does not, NaN for a memory without a speaker."""
    if fact is None or not fact.chunk.speaker:
        return NAN
    names = normalise_name(fact.chunk.speaker).split()
    return float(bool(names) and (names[0] in question or " ".join(names) in question))


def _agreement(rankings: Mapping[str, Sequence[tuple[UUID, float]]]) -> float:
    """How far the text stages agree: the share of the lexical stage's first ten memories that
    are among the vector stage's first ten (NaN unless both ran)."""
    lexical, vector = rankings.get("bm25"), rankings.get("vector")
    if not lexical or not vector:
        return NAN
    first = {m for m, _ in vector[:AGREEMENT_DEPTH]}
    return sum(m in first for m, _ in lexical[:AGREEMENT_DEPTH]) / AGREEMENT_DEPTH


def _is_question(text: str) -> bool:
    words = text.strip().lower().split()
    return bool(words) and (text.rstrip().endswith("?") or words[0] in QUESTION_WORDS)


def _sentence_cosine(facts: CandidateFacts | None) -> float:
    if facts is None:
        return NAN
    best = facts.sentence_cosine if facts.sentence_cosine is not None else facts.cosine
    return NAN if best is None else best


def _nanmax(values: np.ndarray) -> float:
    return NAN if np.isnan(values).all() else float(np.nanmax(values))


def _stage_positions(
    rankings: Mapping[str, Sequence[tuple[UUID, float]]],
) -> dict[str, dict[UUID, tuple[float, float]]]:
    """{stage: {memory: (rank from 1, score relative to the stage's best)}}."""
    positions: dict[str, dict[UUID, tuple[float, float]]] = {}
    for stage, ranking in rankings.items():
        if not ranking:
            continue
        top = ranking[0][1]
        positions[stage] = {
            memory: (float(rank), score / top if top > 0 else NAN)
            for rank, (memory, score) in enumerate(ranking, start=1)
        }
    # The statements stage is the vector search over the tenant's tagged statements: a
    # memory's vector evidence is the better of its two ranks there.
    statements = positions.get("statements", {})
    if statements:
        vector = positions.setdefault("vector", {})
        for memory, found in statements.items():
            if memory not in vector or found[0] < vector[memory][0]:
                vector[memory] = found
    return positions


def _coverage(
    lexemes: Mapping[str, float], facts: CandidateFacts | None, *, weighted: bool
) -> float:
    """Share of the question's lexemes (idf-weighted or plain) that the chunk contains."""
    if facts is None or not lexemes:
        return NAN
    if weighted:
        total = sum(lexemes.values())
        found = sum(w for lexeme, w in lexemes.items() if lexeme in facts.matched_lexemes)
    else:
        total = float(len(lexemes))
        found = float(sum(lexeme in facts.matched_lexemes for lexeme in lexemes))
    return found / total if total > 0 else NAN


def _hit_entities(data: RankingInput) -> dict[UUID, tuple[int, set[UUID]]]:
    """The first hits of the text stages: each with its best rank and its entities."""
    hits: dict[UUID, tuple[int, set[UUID]]] = {}
    for stage in HIT_STAGES:
        for rank, (memory, _) in enumerate(list(data.rankings.get(stage, ()))[:TOP_HITS], 1):
            best = min(rank, hits[memory][0]) if memory in hits else rank
            hits[memory] = (best, set(data.memory_entities.get(memory, {})))
    return hits


def _specificity(data: RankingInput) -> dict[UUID, float]:
    """1 / how many short-listed memories mention the entity: an entity every candidate
    mentions ties nothing together."""
    counts: dict[UUID, int] = {}
    for memory in data.memories:
        for entity in data.memory_entities.get(memory, {}):
            counts[entity] = counts.get(entity, 0) + 1
    return {entity: 1.0 / n for entity, n in counts.items()}


def _entity_columns(
    data: RankingInput,
    facts: Sequence[CandidateFacts | None],
    put: Callable[[str, Sequence[float]], None],
) -> None:
    specificity = _specificity(data)
    # per entity: the first hits mentioning it (their ids and best ranks)
    hits_of: dict[UUID, list[tuple[int, UUID]]] = {}
    for hit, (rank, mentioned) in _hit_entities(data).items():
        for entity in mentioned:
            hits_of.setdefault(entity, []).append((rank, hit))
    named = set(data.query_entities)
    names = {normalise_name(n) for n in data.query_entities.values()}
    rows = []
    for memory, fact in zip(data.memories, facts, strict=True):
        entities = data.memory_entities.get(memory, {})
        title = normalise_name(fact.chunk.title or "") if fact else ""
        links, bridge = 0.0, 0.0
        for entity, name in entities.items():
            others = [rank for rank, hit in hits_of.get(entity, ()) if hit != memory]
            links += specificity.get(entity, 0.0) * len(others)
            if others and title and name == title:  # a first hit names what this is about
                bridge = max(bridge, 1.0 / min(others))
        rows.append((
            len(entities.keys() & named) / len(named) if named else NAN,
            float(bool(title) and title in names) if named else NAN,
            _title_overlap(title, data.question_words) if title else NAN,
            links,
            bridge,
            math.log1p(len(entities)),
        ))  # fmt: skip
    for i, name in enumerate(ENTITY_FEATURES):
        put(name, [row[i] for row in rows])


def _title_overlap(title: str, question: frozenset[str]) -> float:
    """Share of the title's words that the question has."""
    words = [w for w in title.split() if len(w) > 1]
    return sum(w in question for w in words) / len(words) if words else NAN


def _chunk_columns(
    data: RankingInput,
    facts: Sequence[CandidateFacts | None],
    put: Callable[[str, Sequence[float]], None],
) -> None:
    known = data.question_language
    put("length", [NAN if f is None else math.log1p(len(f.chunk.content)) for f in facts])
    put(
        "language_same",
        [
            NAN if f is None or f.language is None or known is None else float(f.language == known)
            for f in facts
        ],
    )
    put("statement", [NAN if f is None else float(f.chunk.kind is not None) for f in facts])
    put(
        "memory_type",
        [NAN if f is None else MEMORY_TYPES.get(f.chunk.memory_type, NAN) for f in facts],
    )


def _recency(data: RankingInput) -> dict[UUID, float]:
    """Each candidate's place by event time among the short list: 0 newest, 1 oldest."""
    created: dict[UUID, datetime] = {}
    for memory in data.memories:
        facts = data.facts.get(data.chunks[memory])
        if facts is not None:
            created[memory] = facts.chunk.occurred_at or facts.chunk.created_at
    order = sorted(created, key=lambda m: created[m], reverse=True)
    span = max(1, len(order) - 1)
    return {memory: i / span for i, memory in enumerate(order)}


def _query_row(signals: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    return {
        name: float(signals.get(stage, {}).get(key, NAN))
        for (stage, key), name in QUERY_SIGNALS.items()
    }
