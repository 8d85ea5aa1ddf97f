"""The graph subsystem: the service over the PostgreSQL graph (the record), the reader the
recall's graph stage uses (PostgreSQL or Neo4j) and, with a Neo4j URL, the mirror's drainer."""

from __future__ import annotations

from dataclasses import dataclass

from knowmind.db.engine import Database
from knowmind.graph.base import GraphReader
from knowmind.graph.registry import BoltAccess, build_graph_reader
from knowmind.services.graph import GraphService
from knowmind.settings import GraphSettings
from knowmind.workers.mirror import MirrorDrainer

__all__ = ["GraphParts", "build_graph"]


@dataclass(frozen=True, slots=True)
class GraphParts:
    service: GraphService
    reader: GraphReader
    mirror: MirrorDrainer | None  # None: no Neo4j mirror configured

    async def close(self) -> None:
        if self.mirror is not None:
            await self.mirror.close()
        close_reader = getattr(self.reader, "close", None)
        if close_reader is not None:
            await close_reader()


def build_graph(settings: GraphSettings, db: Database) -> GraphParts:
    bolt = None
    if settings.neo4j_url:
        bolt = BoltAccess(settings.neo4j_url, settings.neo4j_user, settings.neo4j_password)
    reader = build_graph_reader(settings.graph_backend, db, bolt)
    return GraphParts(GraphService(db), reader, _mirror_drainer(db, settings))


def _mirror_drainer(db: Database, settings: GraphSettings) -> MirrorDrainer | None:
    if not settings.neo4j_url:
        return None
    from knowmind.graph.neo4j_mirror import Neo4jMirror

    url, user, password = settings.neo4j_url, settings.neo4j_user, settings.neo4j_password

    async def connect() -> Neo4jMirror:
        return await Neo4jMirror.connect(url, user, password, batch_size=settings.graph_batch_size)

    return MirrorDrainer(
        db,
        connect,
        batch_size=settings.graph_batch_size,
        max_backoff_seconds=settings.graph_retry_max_seconds,
    )
