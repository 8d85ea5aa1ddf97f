"""The one interface every recall stage implements, and what the pipeline shares with stages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from uuid import UUID

import numpy as np

from knowmind.db.engine import Database
from knowmind.linking.matching import MatchedEntity
from knowmind.store.search import MemoryFilters

__all__ = [
    "Candidate",
    "RecallQuery",
    "RecallStage",
    "StageContext",
    "StageUnavailableError",
]


@dataclass(frozen=True, slots=True)
class RecallQuery:
    tenant_id: UUID
    language: str
    text: str
    filters: MemoryFilters
    candidates: int
    hops: int = 2
    explain: bool = False


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


class StageUnavailableError(RuntimeError):
    """Raised by a stage that cannot run for this request; the message says why."""


class RecallStage(Protocol):
    name: str

    async def search(self, query: RecallQuery, ctx: StageContext) -> list[Candidate]:
        """Candidates best first, at most ``query.candidates`` of them."""
        ...
