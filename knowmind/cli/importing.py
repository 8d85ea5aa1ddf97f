"""``knowmind import FILE.jsonl``: memories (and conversations) from a JSON Lines file, through
a running server (``--url``/``--token``) or with ``--tenant`` straight into the database."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
from tqdm import tqdm

from knowmind.api.batch_schemas import draft_or_error
from knowmind.api.turn_schemas import conversation_or_error
from knowmind.cli.common import TENANT_HELP, Subparsers, add_server_options, on_database
from knowmind.client import Knowmind, KnowmindAPIError
from knowmind.client.jsonl import (
    JsonLine,
    LineResult,
    import_lines,
    import_parts,
    is_conversation,
    read_jsonl,
)
from knowmind.contract.limits import MAX_MESSAGES
from knowmind.errors import InvalidInputError
from knowmind.models.factory import build_embedder
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.batch import MAX_BATCH_ITEMS, ItemError, remember_batch
from knowmind.services.memories import MemoryService
from knowmind.services.turns import remember_conversation
from knowmind.settings import Settings

__all__ = ["add_parser", "cmd_import"]

Counts = dict[str, int]  # created, unchanged, error


def cmd_import(settings: Settings, args: argparse.Namespace) -> int:
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


def _import_over_http(args: argparse.Namespace, lines: list[JsonLine]) -> Counts | None:
    """Through ``POST /v1/memories/batch`` (the Python client: retries on 429/503)."""
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
) -> Counts:
    """Straight into the database, in batches of 100 through the batch service; extraction
    jobs are queued for the server's (or ``knowmind worker``'s) job worker."""
    embedder = build_embedder(settings.models.embedder, settings.models.embedder_threads)
    counts = {"created": 0, "unchanged": 0, "error": 0}

    async def run(settings: Settings) -> None:
        runtime = await Runtime.start(settings, embedder)
        try:
            tenant = await runtime.admin.admin.find_tenant(args.tenant)
            who = Principal(tenant.id, frozenset({"write"}), language=tenant.language)
            with tqdm(total=len(lines), unit="memory", desc=args.file.name, file=sys.stderr) as bar:
                for part in import_parts(lines, MAX_BATCH_ITEMS):
                    await _remember_part(runtime.ingest.memories, who, part, counts, bar)
            await runtime.admin.admin.refresh_statistics()  # the planner should know the new rows
        finally:
            await runtime.close()

    on_database(settings, run)
    return counts


async def _remember_part(
    memories: MemoryService, who: Principal, part: list[JsonLine], counts: Counts, bar: tqdm[Any]
) -> None:
    """One part of the file: a conversation line, or up to 100 memory lines."""
    if is_conversation(part[0]):
        failed = await _remember_conversation(memories, who, part[0], counts)
        if failed is not None:
            counts["error"] += 1
            bar.write(f"line {part[0].number}: {failed}", sys.stderr)
        bar.update(1)
        return
    items = [
        ItemError("", line.error) if line.error else draft_or_error(line.item) for line in part
    ]
    results = await remember_batch(memories, who, items)
    for line, result in zip(part, results, strict=True):
        counts[result.status] += 1
        if result.error is not None:
            where = result.error.field or "item"
            bar.write(f"line {line.number}: {where}: {result.error.message}", sys.stderr)
    bar.update(len(part))


async def _remember_conversation(
    memories: MemoryService, who: Principal, line: JsonLine, counts: Counts
) -> str | None:
    """A session line, through the conversation service (in parts, as the client sends it);
    the reason it failed."""
    body = dict(line.item)
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages: must be an array"
    offset = body.get("offset", 0)
    for start in range(0, max(len(messages), 1), MAX_MESSAGES):
        part = body | {"messages": messages[start : start + MAX_MESSAGES]}
        if start:
            part["offset"] = offset + start
        draft = conversation_or_error(part)
        if isinstance(draft, ItemError):
            return f"{draft.field or 'item'}: {draft.message}"
        try:
            done = await remember_conversation(memories, who, draft)
        except InvalidInputError as exc:
            return f"{exc.field}: {exc.message}"
        body["session_id"] = done.session_id
        counts["created"] += done.created
        counts["unchanged"] += done.unchanged
    return None


def add_parser(sub: Subparsers) -> None:
    load = sub.add_parser(
        "import", help="import memories from a JSON Lines file (one memory per line)"
    )
    load.add_argument(
        "file",
        type=Path,
        help="FILE.jsonl: one POST /v1/memories body per line, or a conversation "
        "(a POST /v1/memories/conversation body: {messages: [...], session_id?, ...})",
    )
    add_server_options(
        load, "KNOWMIND_TOKEN", token_help="or $KNOWMIND_TOKEN", url_help="or KNOWMIND_URL"
    )
    load.add_argument(
        "--tenant", help=f"write into the database directly (no server; local admin): {TENANT_HELP}"
    )
    load.set_defaults(fn=cmd_import)
