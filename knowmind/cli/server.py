"""``knowmind serve`` (migrate, then the HTTP server) and ``knowmind worker`` (the job worker
and graph mirror without it)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from contextlib import suppress
from pathlib import Path

import uvicorn

from knowmind.app import create_app
from knowmind.cli.admin_token import data_dir_named, ensure_admin_token
from knowmind.cli.common import Subparsers, database, database_and_server, migrate_schema
from knowmind.models.factory import build_embedder, build_query_embedder
from knowmind.runtime import Runtime
from knowmind.settings import Settings

__all__ = ["add_serve_parser", "add_worker_parser", "admin_walkthrough", "cmd_serve"]

GRACEFUL_SHUTDOWN_S = 20


def cmd_serve(settings: Settings, _: argparse.Namespace) -> int:
    embedder = build_embedder(settings.models.embedder, settings.models.embedder_threads)
    _private_dir(settings.server.data_dir)
    settings, generated = ensure_admin_token(settings)
    with database_and_server(settings) as (settings, embedded):
        migrate_schema(settings, embedder)
        _print_banner(settings, generated)
        models = settings.models
        query_embedder = build_query_embedder(
            models.embedder, models.embedder_threads, models.separate_query_model
        )
        app = create_app(
            settings, embedder=embedder, embedded=embedded, query_embedder=query_embedder
        )
        # uvicorn shuts down gracefully, then re-raises SIGTERM; turn that into SystemExit so
        # the embedded PostgreSQL is stopped on the way out.
        signal.signal(signal.SIGTERM, _exit_on_signal)
        uvicorn.run(
            app,
            host=settings.server.host,
            port=settings.server.port,
            log_config=None,
            access_log=False,
            lifespan="on",
            # uvicorn would take X-Forwarded-For from 127.0.0.1; the app reads it itself, from
            # KNOWMIND_TRUSTED_PROXIES only, and keeps the peer (knowmind.services.access)
            proxy_headers=False,
            # requests still running after this are cancelled (their queued embedding work
            # is dropped with them), so a SIGTERM ends the process in bounded time
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        )
    return 0


def _private_dir(path: Path) -> None:
    """The server's data directory (admin token, embedded database) is 0700 on every start,
    however it was made (the embedded database then lets its own OS user pass, see
    EmbeddedPostgres._prepare_dirs)."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)


def _exit_on_signal(signum: int, _frame: object) -> None:
    raise SystemExit(0)


def _print_banner(settings: Settings, generated_token: str | None) -> None:
    """Where the server listens, its data dir, and lines that work when pasted into a shell
    (twice too: the second run answers with the tenant made by the first)."""
    base = f"http://{settings.server.host}:{settings.server.port}"
    lines = [
        f"knowmind listening on {base}  (OpenAPI: {base}/schema)",
        f"data dir {data_dir_named(settings)}",
    ]
    if generated_token:
        lines.append(f"admin token (shown once, saved to {settings.server.admin_token_file}):")
        lines.append(f"  {generated_token}")
    lines.append("get a tenant token (paste into a shell):")
    lines.extend("  " + line for line in admin_walkthrough(settings, base))
    print("\n".join(lines), flush=True)


def admin_walkthrough(settings: Settings, base: str) -> list[str]:
    """Shell lines that create a tenant (or, run again, find it: a 409 names its id) and a
    read/write token for it."""
    if os.environ.get("KNOWMIND_ADMIN_TOKEN"):
        admin = 'ADMIN="$KNOWMIND_ADMIN_TOKEN"'
    else:
        admin = f"ADMIN=$(cat '{settings.server.admin_token_file}')"
    as_admin = '-H "Authorization: Bearer $ADMIN" -H "Content-Type: application/json"'
    # prints the field, or exits with the server's own words (a refused token, say)
    field = (
        "python3 -c 'import sys, json; r = json.load(sys.stdin); "
        'print(r["{0}"]) if "{0}" in r '
        'else sys.exit("knowmind: " + str(r.get("detail", r)))\''
    )
    return [
        admin,
        f"TENANT=$(curl -s -X POST {base}/v1/admin/tenants {as_admin} "
        f'-d \'{{"name": "demo"}}\' | {field.format("id")})',
        f"TOKEN=$(curl -s -X POST {base}/v1/admin/tenants/$TENANT/tokens {as_admin} "
        f'-d \'{{"scopes": ["read", "write"]}}\' | {field.format("token")})',
        'echo "tenant $TENANT token $TOKEN"',
    ]


def cmd_worker(settings: Settings, _: argparse.Namespace) -> int:
    """The job worker and mirror drainer without the HTTP server."""
    embedder = build_embedder(settings.models.embedder, settings.models.embedder_threads)

    async def run(settings: Settings) -> None:
        runtime = await Runtime.start(settings, embedder)
        # SIGTERM cancels this task at an await: a SystemExit raised wherever the signal lands
        # could be caught on the way (once seen turned into a driver's ValueError mid-query,
        # which the job loop logged and survived, so the worker never stopped)
        main = asyncio.current_task()
        assert main is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
        runtime.start_workers()
        print(
            "knowmind worker running (jobs"
            + (", graph mirror)" if runtime.workers.mirror else ")"),
            flush=True,
        )
        try:
            await asyncio.gather(*runtime.background_tasks)
        except asyncio.CancelledError:
            pass  # SIGTERM: stop the background tasks below and exit normally
        finally:
            await runtime.close()

    signal.signal(signal.SIGTERM, _exit_on_signal)  # until the event loop takes it over
    with database(settings) as settings, suppress(KeyboardInterrupt):
        migrate_schema(settings, embedder)  # a no-op at head; waits while another migrates
        asyncio.run(run(settings))
    return 0


def add_serve_parser(sub: Subparsers) -> None:
    sub.add_parser("serve", help="migrate and start the HTTP server").set_defaults(fn=cmd_serve)


def add_worker_parser(sub: Subparsers) -> None:
    sub.add_parser("worker", help="run the job worker and graph mirror").set_defaults(fn=cmd_worker)
