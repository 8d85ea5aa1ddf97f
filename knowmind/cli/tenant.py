"""``knowmind tenant create | list | sentences`` (and ``export | import``, in
``tenant_archive``): tenants on the database, beside a running server or without one."""

from __future__ import annotations

import argparse
import sys

import msgspec

from knowmind.cli import tenant_archive
from knowmind.cli.common import TENANT_HELP, Subparsers, command_group, on_admin
from knowmind.errors import ConflictError
from knowmind.services.admin import AdminService, Backfill
from knowmind.settings import Settings
from knowmind.store.rows import TenantRow

__all__ = ["add_parser", "cmd_tenant_create", "cmd_tenant_list", "cmd_tenant_sentences"]


def cmd_tenant_create(settings: Settings, args: argparse.Namespace) -> int:
    """A new tenant; with ``--if-missing`` the tenant of that name when it exists already (a
    walkthrough run twice), refused only when its language is not the one asked for."""

    async def create(admin: AdminService) -> tuple[TenantRow, bool]:
        language = args.language or settings.database.default_language
        try:
            return await admin.create_tenant(args.name, language), True
        except ConflictError as exc:
            if not args.if_missing or exc.existing_id is None:
                raise
            row = await admin.get_tenant(exc.existing_id)
        if args.language and row.language != args.language:
            raise ConflictError(
                f"tenant {row.name!r} ({row.id}) exists already with language {row.language}, "
                f"not {args.language}"
            )
        return row, False

    try:
        row, created = on_admin(settings, create)
    except ConflictError as exc:
        if exc.existing_id is None:
            raise
        print(
            f"knowmind tenant create: {exc} (tenant {exc.existing_id}); --if-missing answers "
            "with it instead",
            file=sys.stderr,
        )
        return 1
    if args.quiet:
        print(row.id)
    else:
        print(_line(row) + ("" if created else " (exists already)"))
    return 0


def cmd_tenant_list(settings: Settings, args: argparse.Namespace) -> int:
    async def tenants(admin: AdminService) -> list[TenantRow]:
        return await admin.list_tenants()

    rows = on_admin(settings, tenants)
    if args.json:
        print(msgspec.json.encode(rows).decode())
        return 0
    for row in rows:
        print(f"{_line(row)} created={row.created_at.isoformat(timespec='seconds')}")
    if not rows:
        print("no tenants yet: knowmind tenant create NAME", file=sys.stderr)
    return 0


def cmd_tenant_sentences(settings: Settings, args: argparse.Namespace) -> int:
    """Queue the sentence-vector backfill of one tenant (``--tenant``) or of every tenant."""

    async def backfill(admin: AdminService) -> list[Backfill]:
        if args.tenant:
            tenants = [await admin.find_tenant(args.tenant)]
        else:
            tenants = await admin.list_tenants()
        return [await admin.backfill_sentences(t.id) for t in tenants]

    for result in on_admin(settings, backfill):
        if result.queued:
            state = "job queued"
        elif result.missing:
            state = "a job is waiting already"
        else:
            state = "nothing missing"
        missing = f"{result.missing} chunks without sentence vectors"
        print(f"tenant {result.tenant_id}: {missing}, {state}")
    if settings.ingest.sentence_vectors != "on":
        print(
            "note: KNOWMIND_SENTENCE_VECTORS is off: the workers leave the jobs waiting until it "
            "is on",
            file=sys.stderr,
        )
    return 0


def _line(row: TenantRow) -> str:
    return f"tenant {row.id} name={row.name} language={row.language}"


def add_parser(sub: Subparsers) -> None:
    tenant = command_group(sub, "tenant", "manage tenants")
    create = tenant.add_parser("create", help="create a tenant")
    create.add_argument("name")
    create.add_argument("--language", help="text search configuration, e.g. german, english")
    create.add_argument(
        "--if-missing",
        action="store_true",
        help="a tenant of this name exists already: answer with it (exit 0) instead of "
        "refusing; safe to run twice",
    )
    create.add_argument("-q", "--quiet", action="store_true", help="print the tenant id only")
    create.set_defaults(fn=cmd_tenant_create)
    listing = tenant.add_parser("list", help="list the tenants (id, name, language, created)")
    listing.add_argument("--json", action="store_true", help="a JSON array, one object each")
    listing.set_defaults(fn=cmd_tenant_list)
    sentences = tenant.add_parser(
        "sentences",
        help="queue the sentence vectors of chunks that have none (after switching "
        "KNOWMIND_SENTENCE_VECTORS on): the job worker makes them",
    )
    sentences.add_argument("--tenant", help=f"{TENANT_HELP} (default: every tenant)")
    sentences.set_defaults(fn=cmd_tenant_sentences)
    tenant_archive.add_parsers(tenant)
