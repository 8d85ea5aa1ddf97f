"""The graph backends the graph stage can read from, by name (``KNOWMIND_GRAPH_BACKEND``).

``postgres`` reads the system of record; ``neo4j`` reads the Bolt mirror (Neo4j, FalkorDB).
A new backend: a :class:`~knowmind.graph.base.GraphReader` and a factory in ``GRAPH_READERS``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from knowmind.db.engine import Database
from knowmind.graph.base import GraphReader
from knowmind.graph.postgres_reader import PostgresGraphReader

__all__ = [
    "GRAPH_READERS",
    "BoltAccess",
    "UnknownGraphBackendError",
    "build_graph_reader",
    "check_graph_backend",
]


@dataclass(frozen=True, slots=True)
class BoltAccess:
    """Where the Neo4j mirror listens and how to log in."""

    url: str
    user: str | None = None
    password: str | None = None


class UnknownGraphBackendError(ValueError):
    """A graph backend name that is not in the registry, or one missing what it needs."""


def _postgres(db: Database, bolt: BoltAccess | None) -> GraphReader:
    return PostgresGraphReader(db)


def _neo4j(db: Database, bolt: BoltAccess | None) -> GraphReader:
    if bolt is None:
        raise UnknownGraphBackendError("the neo4j graph backend needs a Bolt URL")
    from knowmind.graph.neo4j_reader import Neo4jGraphReader  # the driver only when used

    return Neo4jGraphReader(bolt.url, bolt.user, bolt.password)


GRAPH_READERS: dict[str, Callable[[Database, BoltAccess | None], GraphReader]] = {
    "postgres": _postgres,
    "neo4j": _neo4j,
}


def check_graph_backend(name: str) -> None:
    if name not in GRAPH_READERS:
        raise UnknownGraphBackendError(
            f"unknown graph backend {name!r}; known: {', '.join(GRAPH_READERS)}"
        )


def build_graph_reader(name: str, db: Database, bolt: BoltAccess | None) -> GraphReader:
    check_graph_backend(name)
    return GRAPH_READERS[name](db, bolt)
