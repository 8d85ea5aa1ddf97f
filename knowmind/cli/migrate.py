"""``knowmind migrate``: the schema to head (``serve`` and ``worker`` do it too)."""

from __future__ import annotations

import argparse

from knowmind.cli.common import Subparsers, database, migrate_schema
from knowmind.models.factory import build_embedder
from knowmind.settings import Settings

__all__ = ["add_parser", "cmd_migrate"]


def cmd_migrate(settings: Settings, _: argparse.Namespace) -> int:
    embedder = build_embedder(settings.models.embedder, settings.models.embedder_threads)
    with database(settings) as settings:
        migrate_schema(settings, embedder)
    print("schema is at head")
    return 0


def add_parser(sub: Subparsers) -> None:
    sub.add_parser("migrate", help="migrate the schema to head").set_defaults(fn=cmd_migrate)
