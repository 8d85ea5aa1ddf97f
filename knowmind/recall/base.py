"""The one interface every recall stage implements, and what the pipeline shares with stages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

import numpy as np

from knowmind.db.engine import Database
from knowmind.linking.matching import MatchedEntity
from knowmind.recall.timeframe import TimeWindow
from knowmind.store.search import MemoryFilters

__all__ = [
    "Candidate",
    "RecallRequest",
    "RecallStage",
    "StageContext",
    "StageUnavailableError",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecallRequest:
    """Everything one recall asks for. The doors fill in what the caller asked;
    ``RecallService`` sets the tenant and language from the caller's token and the number of
    candidates per stage from the recall settings."""

    text: str
    tenant_id: UUID | None = None
    language: str = "german"
    filters: MemoryFilters = field(default_factory=MemoryFilters)
    k: int = 5
    candidates: int = 50  # per stage, before fusion
    stages: Sequence[str] | None = None  # None: every stage
    weights: Mapping[str, float] | None = None  # over the configured defaults
    fusion: str | None = None  # "rrf" or "convex"; None: the configured one
    ranker: str | None = None  # "learned" or "rrf"; None: the configured one
    rerank: bool | None = None  # None: when a reranker is active
    min_score: float = 0.0  # results scoring below it are dropped
    # the time "last week" or "gestern" is relative to (None: ``filters.as_of``, else now)
    reference_time: datetime | None = None
    # ranker features treated as unknown (the benchmark's ablations; no door sets it)
    ignore_features: tuple[str, ...] = ()
    hops: int = 2  # graph hops; 0 leaves the graph stage out
    explain: bool = False

    @property
    def tenant(self) -> UUID:
        if self.tenant_id is None:
            raise ValueError("a RecallRequest runs for a tenant (RecallService sets it)")
        return self.tenant_id


@dataclass(frozen=True, slots=True)
class Candidate:
    """One ranked hit of a stage: a chunk and the memory it belongs to."""

    chunk_id: UUID
    memory_id: UUID
    score: float


@dataclass(slots=True)
class StageContext:
    """What the pipeline shares with its stages. Every callable is computed at most once per
    recall however many stages await it."""

    db: Database
    query_embedding: Callable[[], Awaitable[np.ndarray]]
    query_entities: Callable[[], Awaitable[list[MatchedEntity]]]
    # Another stage's candidates (empty when that stage is not part of this recall).
    results_of: Callable[[str], Awaitable[list[Candidate]]]
    explain: dict[str, Any] = field(default_factory=dict)
    # Per-stage evidence about how well the stage fits this query (e.g. bm25: share of query
    # terms matched; vector: top-1 margin), keyed by stage name; read by fusion to weight stages.
    signals: dict[str, dict[str, float]] = field(default_factory=dict)
    # Per-candidate evidence a stage found (e.g. the relation path that reached a memory), keyed
    # by stage, then memory id, then feature name; read by the ranker as features.
    evidence: dict[str, dict[UUID, dict[str, float]]] = field(default_factory=dict)
    # The question's lexemes with their idf (set by the lexical stage) and its language (a
    # text-search configuration name, None when unsure): the ranker's term coverage and
    # language match.
    query_lexemes: dict[str, float] = field(default_factory=dict)
    question_language: str | None = None
    # whether the query embedding was asked for (the ranker reads it only then)
    embedding_started: Callable[[], bool] = lambda: False
    # the event-time window the question names (None: it names none), and whether it asks
    # for a time ("when …", "wann …")
    time_window: TimeWindow | None = None
    asks_when: bool = False


class StageUnavailableError(RuntimeError):
    """Raised by a stage that cannot run for this request; the message says why."""


class RecallStage(Protocol):
    name: str

    async def search(self, query: RecallRequest, ctx: StageContext) -> list[Candidate]:
        """Candidates best first, at most ``query.candidates`` of them."""
        ...
