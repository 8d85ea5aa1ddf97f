"""``knowmind token create``: a tenant's bearer token, printed once."""

from __future__ import annotations

import argparse

from knowmind.cli.common import TENANT_HELP, Subparsers, command_group, on_admin
from knowmind.services.admin import AdminService, IssuedToken
from knowmind.settings import Settings

__all__ = ["add_parser", "cmd_token_create"]


def cmd_token_create(settings: Settings, args: argparse.Namespace) -> int:
    async def create(admin: AdminService) -> IssuedToken:
        tenant = await admin.find_tenant(args.tenant)
        return await admin.create_token(tenant.id, args.scopes.split(","), user_id=args.user_id)

    issued = on_admin(settings, create)
    if not args.quiet:
        print(
            f"token id {issued.row.id} tenant {issued.row.tenant_id} "
            f"scopes={','.join(issued.row.scopes)}"
        )
    print(issued.token)
    return 0


def add_parser(sub: Subparsers) -> None:
    token = command_group(sub, "token", "manage tokens")
    create = token.add_parser("create", help="issue a token for a tenant (printed once)")
    create.add_argument("--tenant", required=True, help=TENANT_HELP)
    create.add_argument("--scopes", default="read,write", help="comma-separated: read,write,admin")
    create.add_argument(
        "--user-id", help="bind the token to one end user of the tenant (their memories only)"
    )
    create.add_argument(
        "-q", "--quiet", action="store_true", help="print the token only: TOKEN=$(knowmind ...)"
    )
    create.set_defaults(fn=cmd_token_create)
