"""``knowmind citus plan [--apply]``: the Citus distribution DDL of the migrated schema."""

from __future__ import annotations

import argparse
import asyncio
import sys

from knowmind.cli.common import Subparsers, command_group
from knowmind.db.citus import apply_plan, plan_for
from knowmind.settings import Settings, SettingsError

__all__ = ["add_parser", "cmd_citus_plan"]


def cmd_citus_plan(settings: Settings, args: argparse.Namespace) -> int:
    """Print the plan (or run it with --apply); refuse while the schema has blockers (exit 1).
    Needs KNOWMIND_DATABASE_URL: the embedded server cannot host Citus."""
    url = settings.database.database_url
    if not url:
        raise SettingsError("citus plan needs KNOWMIND_DATABASE_URL (the schema owner's URL)")
    plan = asyncio.run(plan_for(url, args.schema))
    if plan.blockers:
        print(f"knowmind citus plan: {len(plan.blockers)} blockers:", file=sys.stderr)
        for blocker in plan.blockers:
            print(f"  {blocker}", file=sys.stderr)
        return 1
    if not args.apply:
        print(plan.ddl(), end="")
        return 0
    asyncio.run(apply_plan(url, plan))
    print(
        f"distributed {len(plan.of_kind('distributed'))} tables by tenant_id "
        f"(co-located with {plan.anchor}), {len(plan.of_kind('reference'))} reference tables"
    )
    return 0


def add_parser(sub: Subparsers) -> None:
    actions = command_group(sub, "citus", "distribute the schema over a Citus cluster")
    plan = actions.add_parser(
        "plan", help="print the distribution DDL read from the live schema (or --apply it)"
    )
    plan.add_argument(
        "--apply", action="store_true", help="run it against KNOWMIND_DATABASE_URL (owner)"
    )
    plan.add_argument("--schema", default="public", help="schema to plan (default public)")
    plan.set_defaults(fn=cmd_citus_plan)
