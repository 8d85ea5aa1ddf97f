"""The one interface every recall stage implements."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

import numpy as np

from knowmind.db.engine import Database
from knowmind.store.search import MemoryFilters

__all__ = ["Candidate", "RecallQuery", "RecallStage", "StageContext", "StageUnavailableError"]


@dataclass(frozen=True, slots=True)
class RecallQuery:
    tenant_id: UUID
    language: str
    text: str
    filters: MemoryFilters
    candidates: int


@dataclass(frozen=True, slots=True)
class Candidate:
    """One ranked hit of a stage: a chunk and the memory it belongs to."""

    chunk_id: UUID
    memory_id: UUID
    score: float


@dataclass(frozen=True, slots=True)
class StageContext:
    """What the pipeline shares with its stages."""

    db: Database
    query_embedding: Callable[[], Awaitable[np.ndarray]]


class StageUnavailableError(RuntimeError):
    """Raised by a stage that cannot run for this request; the message says why."""


class RecallStage(Protocol):
    name: str

    async def search(self, query: RecallQuery, ctx: StageContext) -> list[Candidate]:
        """Candidates best first, at most ``query.candidates`` of them."""
        ...
