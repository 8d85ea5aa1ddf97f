"""``knowmind graph resync --tenant T``: rebuild one tenant's Neo4j mirror from PostgreSQL."""

from __future__ import annotations

import argparse

from knowmind.cli.common import TENANT_HELP, Subparsers, command_group, on_database
from knowmind.db.engine import Database
from knowmind.graph.neo4j_mirror import Neo4jMirror
from knowmind.services.admin import find_tenant
from knowmind.settings import Settings, SettingsError
from knowmind.store.rows import TenantRow
from knowmind.workers.mirror import resync_tenant

__all__ = ["add_parser", "cmd_graph_resync"]


def cmd_graph_resync(settings: Settings, args: argparse.Namespace) -> int:
    if not settings.graph.neo4j_url:
        raise SettingsError("graph resync needs KNOWMIND_NEO4J_URL")

    async def run(settings: Settings) -> tuple[TenantRow, dict[str, int]]:
        assert settings.database.database_url and settings.graph.neo4j_url
        db = Database.connect(
            settings.database.database_url,
            settings.database.app_database_url,
            2,
            tenant_scope=settings.database.tenant_scope,
        )
        try:
            tenant = await find_tenant(db, args.tenant)
            mirror = await Neo4jMirror.connect(
                settings.graph.neo4j_url,
                settings.graph.neo4j_user,
                settings.graph.neo4j_password,
                batch_size=settings.graph.graph_batch_size,
            )
            try:
                await mirror.ensure_schema()
                return tenant, await resync_tenant(db, mirror, tenant.id)
            finally:
                await mirror.close()
        finally:
            await db.dispose()

    tenant, counts = on_database(settings, run)
    print(f"resynced tenant {tenant.id}: {counts['nodes']} nodes, {counts['edges']} edges")
    return 0


def add_parser(sub: Subparsers) -> None:
    graph = command_group(sub, "graph", "graph mirror")
    resync = graph.add_parser("resync", help="rebuild one tenant's Neo4j mirror from PostgreSQL")
    resync.add_argument("--tenant", required=True, help=TENANT_HELP)
    resync.set_defaults(fn=cmd_graph_resync)
