"""The database subsystem: the pools, and the supervisor that watches them (and restarts the
embedded PostgreSQL this process owns)."""

from __future__ import annotations

from dataclasses import dataclass

from knowmind.db.embedded import EmbeddedPostgres
from knowmind.db.engine import Database
from knowmind.services.supervision import DatabaseSupervisor
from knowmind.settings import Settings

__all__ = ["DatabaseParts", "build_database"]


@dataclass(frozen=True, slots=True)
class DatabaseParts:
    db: Database
    supervisor: DatabaseSupervisor


def build_database(settings: Settings, embedded: EmbeddedPostgres | None) -> DatabaseParts:
    """``settings.database.database_url`` must point at a migrated database; ``embedded``:
    the embedded server it runs on, restarted if it dies."""
    database = settings.database
    assert database.database_url, "the database URL is set before the runtime starts"
    db = Database.connect(
        database.database_url,
        database.app_database_url,
        database.db_pool_size,
        graph_mirror=bool(settings.graph.neo4j_url),
        tenant_scope=database.tenant_scope,
    )
    return DatabaseParts(db, DatabaseSupervisor(db, embedded))
