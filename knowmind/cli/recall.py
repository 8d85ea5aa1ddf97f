"""``knowmind recall QUERY``: a recall against a running server through the Python client."""

from __future__ import annotations

import argparse
import sys

import httpx
import msgspec

from knowmind.cli.common import Subparsers, add_server_options
from knowmind.client import Knowmind, KnowmindAPIError
from knowmind.settings import Settings

__all__ = ["add_parser", "cmd_recall"]


def cmd_recall(_settings: Settings, args: argparse.Namespace) -> int:
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


def add_parser(sub: Subparsers) -> None:
    remote = sub.add_parser("recall", help="ask a running server (over HTTP, any host)")
    remote.add_argument("query")
    remote.add_argument("-k", type=int, default=5, help="how many results (1-25)")
    remote.add_argument(
        "--min-score",
        type=float,
        default=0.0,
        help="leave out results whose score (the probability, 0-1, that they answer) is lower",
    )
    add_server_options(
        remote, "KNOWMIND_TOKEN", token_help="or $KNOWMIND_TOKEN", url_help="or KNOWMIND_URL"
    )
    remote.add_argument("--json", action="store_true", help="print the whole answer as JSON")
    remote.set_defaults(fn=cmd_recall)
