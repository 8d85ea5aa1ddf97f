"""The recall stages by name: the names are defined here once, and each name maps to a factory
that builds its stage from the parts it needs.

A new stage: write its module (a class with ``name`` and ``search``), add its name to
``StageName`` and its factory to ``STAGES``; the API schema, the settings check and the
benchmark pick the name up from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from knowmind.graph.base import GraphReader
from knowmind.models.language import LanguageDetector
from knowmind.recall.base import RecallStage
from knowmind.recall.bm25 import LexicalOptions, OkapiBM25Stage
from knowmind.recall.graph import DEFAULT_HIT_WAIT_S, GraphStage
from knowmind.recall.identity import IdentityStage
from knowmind.recall.paths import RelationPathStage
from knowmind.recall.statements import StatementStage
from knowmind.recall.vector import VectorStage
from knowmind.recall.when import TimeStage
from knowmind.store.vector_search import (
    DEFAULT_EF_SEARCH,
    DEFAULT_EXACT_MAX_ROWS,
    DEFAULT_TENANT_EF_SEARCH,
)

__all__ = [
    "STAGES",
    "STAGE_NAMES",
    "StageName",
    "StageParts",
    "UnknownStageError",
    "build_stages",
    "check_stage_names",
]

# "statements" comes first: where it ties with another stage on a memory, the answer shows its
# chunk (the statement the question asked about; pipeline._best_chunk_per_memory).
StageName = Literal["statements", "bm25", "vector", "graph", "identity", "relations", "time"]
STAGE_NAMES: tuple[StageName, ...] = get_args(StageName)


@dataclass(frozen=True, slots=True)
class StageParts:
    """What the stage factories may draw on."""

    graph_reader: GraphReader
    lexical: LexicalOptions = field(default_factory=LexicalOptions)
    language_detector: LanguageDetector | None = None  # None: no question-language analysis
    vector_exact_max_rows: int = DEFAULT_EXACT_MAX_ROWS
    vector_ef_search: int = DEFAULT_EF_SEARCH
    vector_tenant_ef_search: int = DEFAULT_TENANT_EF_SEARCH
    graph_hit_wait_s: float = DEFAULT_HIT_WAIT_S


StageFactory = Callable[[StageParts], RecallStage]


def _vector(parts: StageParts) -> VectorStage:
    return VectorStage(
        parts.vector_exact_max_rows, parts.vector_ef_search, parts.vector_tenant_ef_search
    )


STAGES: dict[StageName, StageFactory] = {
    "statements": lambda parts: StatementStage(),
    "bm25": lambda parts: OkapiBM25Stage(parts.lexical, parts.language_detector),
    "vector": lambda parts: _vector(parts),
    "graph": lambda parts: GraphStage(parts.graph_reader, hit_wait_s=parts.graph_hit_wait_s),
    "identity": lambda parts: IdentityStage(),
    "relations": lambda parts: RelationPathStage(),
    "time": lambda parts: TimeStage(_vector(parts)),
}


class UnknownStageError(ValueError):
    """A stage name that is not in the registry."""


def check_stage_names(names: Iterable[str]) -> None:
    """Raise :class:`UnknownStageError` naming every unknown stage."""
    unknown = sorted(set(names) - set(STAGE_NAMES))
    if unknown:
        raise UnknownStageError(f"unknown recall stage(s) {unknown}; known: {list(STAGE_NAMES)}")


def build_stages(parts: StageParts, names: Sequence[StageName] = STAGE_NAMES) -> list[RecallStage]:
    """The stages ``names`` (all by default), in that order."""
    return [STAGES[name](parts) for name in names]
