"""``knowmind tenant export | import``: a tenant's archive (``knowmind.tenant-export``, JSON
Lines) from a server or the local database, and restored into an empty tenant of this one."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import IO, Any
from uuid import UUID

from knowmind.db.engine import Database
from knowmind.errors import InvalidInputError
from knowmind.services.tenant_archive import ImportReport, ImportTarget, TenantArchiveService
from knowmind.settings import Settings

__all__ = ["add_archive_commands"]


def add_archive_commands(tenant: Any) -> None:
    """``export`` and ``import`` under ``knowmind tenant`` (``tenant``: its subparsers)."""
    export = tenant.add_parser("export", help="write a tenant's archive (JSON Lines)")
    export.add_argument("--tenant", required=True, type=UUID)
    export.add_argument("-o", "--output", required=True, help="FILE.jsonl, or - for stdout")
    export.add_argument(
        "--url",
        default=os.environ.get("KNOWMIND_URL"),
        help="a running server (or KNOWMIND_URL); without it the local database is read",
    )
    export.add_argument(
        "--token",
        default=os.environ.get("KNOWMIND_ADMIN_TOKEN"),
        help="the server admin token with --url (or KNOWMIND_ADMIN_TOKEN)",
    )
    export.set_defaults(fn=cmd_tenant_export)
    load = tenant.add_parser(
        "import", help="restore an archive into an empty tenant of the local database"
    )
    load.add_argument("file", type=Path, help="an archive from GET /v1/admin/tenants/{id}/export")
    target = load.add_mutually_exclusive_group(required=True)
    target.add_argument("--tenant", type=UUID, help="an existing, empty tenant")
    target.add_argument("--name", help="create a tenant of this name (language of the archive)")
    load.set_defaults(fn=cmd_tenant_import)


async def _service(settings: Settings) -> tuple[Database, TenantArchiveService]:
    from knowmind.cli import _migrated_db

    db, model, dim = await _migrated_db(settings)  # refuses an unmigrated database
    return db, TenantArchiveService(db, model, dim)


def cmd_tenant_import(settings: Settings, args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from knowmind.cli import database

    if not args.file.is_file():
        raise InvalidInputError("file", f"{args.file} is not a readable file")

    async def run() -> ImportReport:
        db, service = await _service(settings)
        try:
            with (
                args.file.open("rb") as handle,
                tqdm(
                    total=args.file.stat().st_size,
                    unit="B",
                    unit_scale=True,
                    desc=args.file.name,
                    file=sys.stderr,
                ) as bar,
            ):
                return await service.import_archive(
                    handle, ImportTarget(args.tenant, args.name), progress=bar.update
                )
        finally:
            await db.dispose()

    with database(settings) as settings:
        report = asyncio.run(run())
    rows = ", ".join(f"{n} {kind}" for kind, n in report.counts.items() if n)
    print(f"tenant {report.tenant.id} ({report.tenant.name}): imported {rows or 'nothing'}")
    for note in report.notes:
        print(f"note: {note}")
    if settings.graph.neo4j_url:
        print("the graph mirror's changes are queued: the server's (or `knowmind worker`'s) ")
        print("mirror drainer sends them to Neo4j")
    min_rows = settings.recall.vector_tenant_index_min_rows
    if min_rows and report.counts.get("chunk", 0) >= min_rows:
        print(
            "a large tenant: build its own HNSW index "
            f"(knowmind tenant-index --tenant {report.tenant.id})"
        )
    print("no tokens are in an archive: issue new ones (knowmind token create --tenant ...)")
    return 0


def cmd_tenant_export(settings: Settings, args: argparse.Namespace) -> int:
    if args.url:
        if not args.token:
            print("knowmind tenant export: --url needs --token (the server admin token)")
            return 2
        with _output(args.output) as out:
            _export_over_http(args.url, args.token, args.tenant, out)
        return 0
    from knowmind.cli import database

    async def run(out: IO[bytes]) -> None:
        db, service = await _service(settings)
        try:
            async for part in await service.export(args.tenant, None):
                out.write(part)
        finally:
            await db.dispose()

    with database(settings) as settings, _output(args.output) as out:
        asyncio.run(run(out))
    return 0


def _export_over_http(url: str, token: str, tenant: UUID, out: IO[bytes]) -> None:
    import httpx

    path = f"{url.rstrip('/')}/v1/admin/tenants/{tenant}/export"
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.stream("GET", path, headers=headers, timeout=60.0) as response:
        if response.status_code != 200:
            response.read()
            raise InvalidInputError("--tenant", f"the server answered {response.status_code}")
        for part in response.iter_bytes():
            out.write(part)


class _output:
    """The archive's file (written whole or removed), or stdout for ``-``."""

    def __init__(self, name: str) -> None:
        self.path = None if name == "-" else Path(name)
        self.partial = None if self.path is None else self.path.with_suffix(".partial")

    def __enter__(self) -> IO[bytes]:
        if self.partial is None:
            return sys.stdout.buffer
        self.handle = self.partial.open("wb")
        return self.handle

    def __exit__(self, kind: object, *_: object) -> None:
        if self.partial is None or self.path is None:
            sys.stdout.buffer.flush()
            return
        self.handle.close()
        if kind is None:
            self.partial.replace(self.path)
        else:
            self.partial.unlink(missing_ok=True)
