"""What every answer method shares: the passages it retrieves, the language model it asks (each
call counted and timed), and the reasons it could not do what was asked (``degraded``)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from knowmind.models.llm import LLM, Completion, LLMUnavailableError, Message

__all__ = [
    "AnswerContext",
    "MethodOutcome",
    "Passage",
    "Retrieve",
    "SearchSummaries",
    "merge_passages",
]


@dataclass(frozen=True, slots=True)
class Passage:
    memory_id: UUID
    chunk_id: UUID
    title: str | None
    content: str
    score: float
    stages: tuple[str, ...] = ()  # the recall stages that found it
    source: str | None = None  # the memory's source
    summary_level: int | None = None  # a RAPTOR summary node (chunk_id: the node's id)


# (query text, how many) → passages best first; the caller's tenant, filters and options bound
Retrieve = Callable[[str, int], Awaitable[tuple[list[Passage], list[str]]]]
# (query text, how many) → the tenant's nearest summary nodes (RAPTOR), as passages
SearchSummaries = Callable[[str, int], Awaitable[list[Passage]]]


@dataclass(slots=True)
class AnswerContext:
    """One answer's model, retrieval, and its account of what happened."""

    llm: LLM
    retrieve_passages: Retrieve
    max_tokens: int = 256
    search_summaries: SearchSummaries | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    degraded: list[str] = field(default_factory=list)
    cut: list[str] = field(default_factory=list)  # steps whose answer reached max_tokens

    async def ask(
        self, step: str, messages: Sequence[Message], max_tokens: int | None = None
    ) -> str:
        """The model's answer to ``messages``; tokens and time counted under ``step``."""
        started = time.perf_counter()
        try:
            done: Completion = await self.llm.complete(
                messages, max_tokens=max_tokens or self.max_tokens
            )
        finally:
            self._time(step, started)
        self.prompt_tokens += done.prompt_tokens
        self.completion_tokens += done.completion_tokens
        if done.finish_reason == "length":
            self.cut.append(step)
        return done.text.strip()

    async def try_ask(
        self, step: str, messages: Sequence[Message], max_tokens: int | None = None
    ) -> str | None:
        """``ask``, or None with the reason in ``degraded`` when the model cannot answer."""
        try:
            return await self.ask(step, messages, max_tokens)
        except LLMUnavailableError as exc:
            self.degraded.append(f"{step}: {exc}")
            return None

    async def retrieve(self, step: str, query: str, k: int) -> list[Passage]:
        started = time.perf_counter()
        try:
            passages, reasons = await self.retrieve_passages(query, k)
        finally:
            self._time(step, started)
        self.degraded.extend(f"{step}: {reason}" for reason in reasons)
        return passages

    def _time(self, step: str, started: float) -> None:
        elapsed = (time.perf_counter() - started) * 1000
        self.timings_ms[step] = round(self.timings_ms.get(step, 0.0) + elapsed, 2)


@dataclass(slots=True)
class MethodOutcome:
    """What a method retrieved, what it generated from, and how it went."""

    passages: list[Passage]
    retrieval: str  # the retrieval actually used ("dense+lexical", "hyde", …)
    answer: str | None = None  # set when the method generated the answer itself (self_rag)
    details: dict[str, Any] = field(default_factory=dict)


def merge_passages(groups: Sequence[Sequence[Passage]], k: int) -> list[Passage]:
    """One list from several retrievals: each memory once, with its best-scoring passage."""
    best: dict[UUID, Passage] = {}
    for group in groups:
        for passage in group:
            known = best.get(passage.memory_id)
            if known is None or passage.score > known.score:
                best[passage.memory_id] = passage
    return sorted(best.values(), key=lambda p: -p.score)[:k]
