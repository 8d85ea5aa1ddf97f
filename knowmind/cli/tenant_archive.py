"""``knowmind tenant export | import``: a tenant's archive (``knowmind.tenant-export``, JSON
Lines) from a server or the local database, and restored into an empty tenant of this one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import IO
from uuid import UUID

import httpx
from tqdm import tqdm

from knowmind.cli.common import (
    TENANT_HELP,
    Subparsers,
    add_server_options,
    migrated_db,
    on_database,
)
from knowmind.errors import InvalidInputError, NotFoundError
from knowmind.services.admin import find_tenant
from knowmind.services.tenant_archive import ImportReport, ImportTarget, TenantArchiveService
from knowmind.settings import Settings

__all__ = ["add_parsers"]


def add_parsers(tenant: Subparsers) -> None:
    """``export`` and ``import`` under ``knowmind tenant`` (``tenant``: its subparsers)."""
    export = tenant.add_parser("export", help="write a tenant's archive (JSON Lines)")
    export.add_argument("--tenant", required=True, help=TENANT_HELP)
    export.add_argument("-o", "--output", required=True, help="FILE.jsonl, or - for stdout")
    add_server_options(
        export,
        "KNOWMIND_ADMIN_TOKEN",
        token_help="the server admin token with --url (or KNOWMIND_ADMIN_TOKEN)",
        url_help="a running server (or KNOWMIND_URL); without it the local database is read",
    )
    export.set_defaults(fn=cmd_tenant_export)
    load = tenant.add_parser(
        "import", help="restore an archive into an empty tenant of the local database"
    )
    load.add_argument("file", type=Path, help="an archive from GET /v1/admin/tenants/{id}/export")
    target = load.add_mutually_exclusive_group(required=True)
    target.add_argument("--tenant", help=f"an existing, empty tenant: {TENANT_HELP}")
    target.add_argument("--name", help="create a tenant of this name (language of the archive)")
    load.set_defaults(fn=cmd_tenant_import)


def cmd_tenant_import(settings: Settings, args: argparse.Namespace) -> int:
    if not args.file.is_file():
        raise InvalidInputError("file", f"{args.file} is not a readable file")

    async def run(settings: Settings) -> ImportReport:
        db, model, dim = await migrated_db(settings)  # refuses an unmigrated database
        try:
            tenant_id = (await find_tenant(db, args.tenant)).id if args.tenant else None
            service = TenantArchiveService(db, model, dim)
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
                    handle, ImportTarget(tenant_id, args.name), progress=bar.update
                )
        finally:
            await db.dispose()

    report = on_database(settings, run)
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

    async def run(settings: Settings, out: IO[bytes]) -> None:
        db, model, dim = await migrated_db(settings)  # refuses an unmigrated database
        try:
            tenant = await find_tenant(db, args.tenant)
            async for part in await TenantArchiveService(db, model, dim).export(tenant.id, None):
                out.write(part)
        finally:
            await db.dispose()

    with _output(args.output) as out:
        on_database(settings, lambda with_url: run(with_url, out))
    return 0


def _export_over_http(url: str, token: str, ref: str, out: IO[bytes]) -> None:
    base = url.rstrip("/")
    headers = {"Authorization": f"Bearer {token}"}
    tenant = _tenant_id_over_http(base, headers, ref)
    path = f"{base}/v1/admin/tenants/{tenant}/export"
    with httpx.stream("GET", path, headers=headers, timeout=60.0) as response:
        if response.status_code != 200:
            response.read()
            raise InvalidInputError("--tenant", f"the server answered {response.status_code}")
        for part in response.iter_bytes():
            out.write(part)


def _tenant_id_over_http(base: str, headers: dict[str, str], ref: str) -> UUID:
    """The tenant's id: ``ref`` itself, or the id of the server's tenant of that name."""
    try:
        return UUID(ref)
    except ValueError:
        pass
    listed = httpx.get(f"{base}/v1/admin/tenants", headers=headers, timeout=60.0)
    if listed.status_code != 200:
        raise InvalidInputError("--tenant", f"the server answered {listed.status_code}")
    for tenant in listed.json():
        if tenant["name"] == ref:
            return UUID(tenant["id"])
    raise NotFoundError(f"tenant {ref!r} not found")


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
