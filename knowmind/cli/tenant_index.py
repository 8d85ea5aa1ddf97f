"""``knowmind tenant-index [--tenant T [--drop] | --auto]``: large tenants' own HNSW indexes."""

from __future__ import annotations

import argparse
from uuid import UUID

from knowmind.cli.common import TENANT_HELP, Subparsers, migrated_db, on_database
from knowmind.errors import InvalidInputError
from knowmind.services.tenant_index import TenantIndexService
from knowmind.settings import Settings

__all__ = ["add_parser", "cmd_tenant_index"]


def cmd_tenant_index(settings: Settings, args: argparse.Namespace) -> int:
    """Build (``--tenant``, ``--auto``), drop (``--drop``) or list tenants' own HNSW indexes."""
    if args.drop and not args.tenant:
        raise InvalidInputError("--drop", "needs --tenant")
    if args.auto and (args.tenant or args.drop):
        raise InvalidInputError("--auto", "builds for every large tenant: no --tenant/--drop")

    async def run(settings: Settings) -> None:
        db, _, _ = await migrated_db(settings)
        try:
            await _tenant_index(TenantIndexService(db), args, settings)
        finally:
            await db.dispose()

    on_database(settings, run)
    return 0


async def _tenant_index(
    service: TenantIndexService, args: argparse.Namespace, settings: Settings
) -> None:
    if args.auto:
        min_rows = settings.recall.vector_tenant_index_min_rows
        if min_rows == 0:
            print("KNOWMIND_VECTOR_TENANT_INDEX_MIN_ROWS is 0: no tenant indexes built")
            return

        def starting(tenant: UUID, chunks: int) -> None:
            print(f"tenant {tenant}: {chunks} chunks, building its HNSW index ...", flush=True)

        results = await service.build_for_large(min_rows, starting)
        for r in results:
            state = f"built in {r.seconds} s" if r.built else "had a valid index already"
            print(f"tenant {r.tenant_id}: {state}")
        print(f"{len(results)} tenant(s) with at least {min_rows} chunks")
    elif args.tenant:
        tenant = await service.tenant(args.tenant)
        if args.drop:
            dropped = await service.drop(tenant.id)
            print(f"tenant {tenant.id}: " + ("index dropped" if dropped else "had no index"))
            return
        print(f"tenant {tenant.id}: building its HNSW index ...", flush=True)
        result = await service.build(tenant.id)
        state = f"built in {result.seconds} s" if result.built else "had a valid index already"
        print(f"tenant {tenant.id}: {state}")
    else:
        for index in await service.list():
            valid = "valid" if index.valid else "INVALID (interrupted build: rebuild it)"
            size = index.size_bytes / 2**20
            key = "halfvec cast" if index.on_halfvec_cast else "on the column"
            print(f"tenant {index.tenant_id}: {index.name} {valid}, {key}, {size:.1f} MiB")


def add_parser(sub: Subparsers) -> None:
    index = sub.add_parser(
        "tenant-index",
        help="a large tenant's own HNSW index: build, drop, or list them (no options)",
    )
    index.add_argument("--tenant", help=f"{TENANT_HELP}: build its index")
    index.add_argument("--drop", action="store_true", help="drop the --tenant's index instead")
    index.add_argument(
        "--auto",
        action="store_true",
        help="build for every tenant with ≥ KNOWMIND_VECTOR_TENANT_INDEX_MIN_ROWS chunks",
    )
    index.set_defaults(fn=cmd_tenant_index)
