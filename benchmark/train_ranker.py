"""Train the learned ranker: ``make train-ranker`` (``python -m benchmark.train_ranker``).

1. ``collect``: every dataset is ingested through the real services (as the benchmark does)
   and every dev question recalled through the real pipeline with ``explain``: the whole short
   list the ranker would score, with its features, is stored with each candidate's relevance
   label (from the judgements, read only here) in ``DIR/features.jsonl.gz``.
2. ``fit`` (seconds, offline): a LightGBM LambdaRank model on the dev questions (each dataset
   weighs its number of questions to the power 0.5), the number of trees chosen by 5-fold
   cross-validation over questions; an isotonic map from the out-of-fold scores to the share
   of relevant candidates (the probability the server reports); the model and its calibration
   written to ``knowmind/recall/ranker/``, and ``docs/ranker.md`` (feature importances, the
   reliability diagram, cross-validated quality against the fused order and the vector stage).

Only dev questions are collected and fitted on (``benchmark.stats.split_of``); the test split
is what ``make bench`` reports.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmark.datasets import Dataset, load
from benchmark.stats import split_of
from knowmind.recall.features import FEATURE_NAMES

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATASETS = (
    "xquad-de,xquad-de-typo,xquad-en,xquad-en-de,xquad-mixed,musique,dbpedia,locomo,relations"
)
DUMP_NAME = "features.jsonl.gz"


# --- collect ---------------------------------------------------------------------------------


async def collect(args: argparse.Namespace) -> Path:
    from benchmark.__main__ import start_runtime
    from benchmark.runner import document_ids, ingested_tenant
    from knowmind.recall.base import RecallRequest

    path = args.dump / DUMP_NAME
    args.dump.mkdir(parents=True, exist_ok=True)
    splits = {"dev", "test"} if args.all_splits else {"dev"}
    started = time.perf_counter()
    async with start_runtime(args) as runtime:
        tenants: dict[str, Any] = {}
        with gzip.open(path, "wt") as out:
            out.write(json.dumps({"features": list(FEATURE_NAMES)}) + "\n")
            for name in args.datasets.split(","):
                dataset = load(name, args.data_dir)
                base = name.removesuffix("-typo")
                if base not in tenants:
                    tenants[base], _ = await ingested_tenant(runtime, dataset)
                count = 0
                for part, who in zip(dataset.parts(), tenants[base], strict=True):
                    doc_of = await document_ids(runtime, who)
                    for query in part.queries:
                        split = split_of(name, query.id)
                        if split not in splits:
                            continue
                        request = RecallRequest(
                            text=query.text,
                            k=10,
                            ranker="rrf",
                            rerank=False,
                            explain=True,
                            reference_time=query.reference_time,
                        )
                        outcome = await runtime.recall.service.recall(who, request)
                        row = _query_row(name, query, split, part, outcome.shortlist, doc_of)
                        out.write(json.dumps(row) + "\n")
                        count += 1
                elapsed = time.perf_counter() - started
                print(f"{name}: {count} questions ({elapsed:.0f} s)", file=sys.stderr)
    return path


def _query_row(
    name: str, query: Any, split: str, part: Dataset, shortlist: Any, doc_of: dict[Any, str]
) -> dict[str, Any]:
    qrels = part.qrels[query.id]
    return {
        "dataset": name,
        "id": query.id,
        "kind": query.kind,
        "split": split,
        "qrels": qrels,
        "candidates": [
            {
                "source": doc_of.get(hit.chunk.memory_id),
                "label": qrels.get(doc_of.get(hit.chunk.memory_id) or "", 0),
                "fused": hit.fused,
                "features": [_number(hit.features[n]) for n in FEATURE_NAMES],
            }
            for hit in shortlist
        ],
    }


def _number(value: float) -> float | None:
    return None if value != value else round(value, 6)  # NaN → null


def read_dump(path: Path) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt") as source:
        header = json.loads(next(source))
        if tuple(header["features"]) != FEATURE_NAMES:
            raise SystemExit(f"{path}: collected with other features; collect again")
        for line in source:
            yield json.loads(line)


# --- main --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmark.train_ranker", description=__doc__)
    parser.add_argument("--collect", action="store_true", help="collect features first")
    parser.add_argument("--fit", action="store_true", help="fit the ranker on the dump")
    parser.add_argument("--write", action="store_true", help="write the model into the package")
    parser.add_argument("--datasets", default=DEFAULT_DATASETS)
    parser.add_argument("--all-splits", action="store_true", help="collect test questions too")
    parser.add_argument("--dump", type=Path, default=ROOT / "bench-out" / "ranker")
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "datasets")
    parser.add_argument("--cache", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    from benchmark.__main__ import default_cache
    from knowmind.logging import configure_logging

    args = parse_args(argv)
    args.cache = args.cache or default_cache()
    configure_logging("json", "warning")
    if args.collect:
        with tempfile.TemporaryDirectory(prefix="knowmind-ranker-") as tmp:
            args.tmp = Path(tmp)
            asyncio.run(collect(args))
    if args.fit:
        from benchmark.ranker_fit import fit_and_report

        fit_and_report(list(read_dump(args.dump / DUMP_NAME)), args.write, args.dump)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
