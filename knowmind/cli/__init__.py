"""knowmind: a memory server for AI agents. `knowmind serve` runs it (on an embedded
PostgreSQL in the data dir unless KNOWMIND_DATABASE_URL is set); the other commands manage
tenants, tokens, imports and indexes on the same database, beside a running server or
without one. Settings come from KNOWMIND_* variables (KNOWMIND_DATA_DIR: the data dir)."""

from __future__ import annotations

import argparse
import sys

from knowmind.cli import (
    admin_token,
    citus,
    graph,
    importing,
    migrate,
    models,
    recall,
    server,
    tenant,
    tenant_index,
    tokens,
)
from knowmind.db.embedded import EmbeddedPostgresError
from knowmind.db.migrate import SchemaError
from knowmind.errors import KnowmindError
from knowmind.logging import configure_logging
from knowmind.models.factory import EmbedderSpecError
from knowmind.settings import Settings, SettingsError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="knowmind", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    server.add_serve_parser(sub)
    server.add_worker_parser(sub)
    migrate.add_parser(sub)
    admin_token.add_parser(sub)
    tenant.add_parser(sub)
    tokens.add_parser(sub)
    tenant_index.add_parser(sub)
    importing.add_parser(sub)
    recall.add_parser(sub)
    models.add_parser(sub)
    graph.add_parser(sub)
    citus.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = Settings.from_env()
        configure_logging(settings.server.log_format, settings.server.log_level)
        return int(args.fn(settings, args))
    except (SettingsError, SchemaError, EmbeddedPostgresError, EmbedderSpecError) as exc:
        print(f"knowmind: {exc}", file=sys.stderr)
        return 2
    except KnowmindError as exc:
        print(f"knowmind: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
