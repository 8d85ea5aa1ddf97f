"""Fit fusion on the dev split, fast: ``python -m benchmark.calibrate``.

1. ``collect``: every stage runs once per query through the real pipeline (real ingest, real
   stages); each stage's ranking (sources, scores) and signals are stored in a JSON dump.
2. ``fit`` (seconds, offline, from the dump): per stage a logistic model of the stage's own
   quality on the query (its ranking's primary metric, a share in [0, 1]) over its signals,
   on the dev queries only (each dataset weighs the same); then the odds exponent and the
   depth floor by grid search on the dev primary metric
   (macro-averaged over datasets). Writes ``knowmind/recall/fusion_calibration.json``.
3. Every fusion variant is evaluated offline with the pipeline's own fusion code, on dev and
   test, next to each stage alone: the table is printed and stored in the dump directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from statistics import mean
from typing import Any

import numpy as np
from sqlalchemy import text

from benchmark.datasets import Dataset, load, quick
from benchmark.metrics import per_query
from benchmark.stats import primary_metric, split_of
from knowmind.recall.fusion import convex_fusion, reciprocal_rank_fusion
from knowmind.recall.weighting import Calibration, StageModel, stage_weights

ROOT = Path(__file__).resolve().parent.parent
CALIBRATION_FILE = ROOT / "knowmind" / "recall" / "fusion_calibration.json"
DEFAULT_DATASETS = "xquad-de,xquad-de-typo,xquad-en,xquad-en-de,xquad-mixed,musique,dbpedia"
# The signals each stage's model may use (the stages report them; see recall/*.py). Absolute
# lexical scores are left out on purpose: their scale depends on the corpus and the query.
FEATURES: dict[str, tuple[str, ...]] = {
    "bm25": ("matched_share", "language_match", "corrected", "score_gap"),
    "vector": ("top1", "margin"),
    "graph": ("entity_score", "named_entities", "linked", "score_gap"),
    "identity": ("entity_score", "intent_relation"),
}
SHARPNESS = (0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
DEPTH_FLOORS = (5, 50)
FOLLOWERS = ((), ("graph",), ("graph", "identity"))
FOLLOW_EXPONENTS = (1.0, 4.0, 16.0)
RRF_K = 60


# --- collect ---------------------------------------------------------------------------------


def calibration_subset(dataset: Dataset, min_docs: int = 600) -> Dataset:
    """Every query; every judged document plus random others up to ``min_docs`` (the full
    corpora of MuSiQue and DBpedia take hours to embed on two cores)."""
    judged = {d for q in dataset.queries for d in dataset.qrels[q.id]}
    return quick(dataset, len(dataset.queries), max(min_docs, len(judged)))


def sample(name: str, dataset: Dataset, per_split: int | None) -> list[Any]:
    """The first ``per_split`` dev and test queries (all when None)."""
    if per_split is None:
        return list(dataset.queries)
    taken = {"dev": 0, "test": 0}
    chosen = []
    for query in dataset.queries:
        part = split_of(name, query.id)
        if taken[part] < per_split:
            taken[part] += 1
            chosen.append(query)
    return chosen


async def collect(args: argparse.Namespace) -> dict[str, Any]:
    from benchmark.__main__ import start_runtime
    from benchmark.runner import ingested_tenant
    from knowmind.recall.base import RecallRequest

    dump: dict[str, Any] = {"datasets": []}
    async with start_runtime(args) as runtime:
        tenants: dict[str, Any] = {}
        for name in args.datasets.split(","):
            dataset = load(name, args.data_dir)
            if args.subset:
                dataset = calibration_subset(dataset)
            base = name.removesuffix("-typo")
            if base not in tenants:
                tenants[base] = await ingested_tenant(runtime, dataset)
            who = tenants[base][0]
            async with runtime.db.tenant_tx(who.tenant_id) as conn:  # type: ignore[arg-type]
                rows = await conn.execute(
                    text("SELECT id, source FROM memories WHERE tenant_id = :t"),
                    {"t": who.tenant_id},
                )
                source = {r[0]: r[1] for r in rows}
            queries = []
            for query in sample(name, dataset, args.max_queries):
                request = RecallRequest(text=query.text, k=10, rerank=False, fusion="rrf", hops=2)
                outcome = await runtime.recall.recall(who, request)
                queries.append(
                    {
                        "id": query.id,
                        "split": split_of(name, query.id),
                        "rankings": {
                            stage: [[source[m], round(s, 6)] for m, s in ranking]
                            for stage, ranking in outcome.stage_rankings.items()
                        },
                        "signals": outcome.signals,
                    }
                )
            dump["datasets"].append(
                {
                    "dataset": name,
                    "metric": primary_metric(name),
                    "documents": len(dataset.docs),
                    "qrels": {q["id"]: dataset.qrels[q["id"]] for q in queries},
                    "queries": queries,
                }
            )
            args.dump.parent.mkdir(parents=True, exist_ok=True)
            args.dump.write_text(json.dumps(dump))  # after each dataset: usable while running
            print(f"{name}: {len(queries)} queries collected", file=sys.stderr)
    return dump


# --- fuse offline, exactly as the pipeline does ------------------------------------------------


def fuse(query: Mapping[str, Any], method: str, calibration: Calibration | None) -> list[str]:
    rankings = {s: [(d, float(v)) for d, v in r] for s, r in query["rankings"].items()}
    if method.startswith("only:"):
        return [d for d, _ in rankings.get(method[5:], [])][:10]
    depths = {s: len(r) for s, r in rankings.items()}
    if method == "rrf":
        weights = {s: 1.0 for s in rankings}
    else:
        chosen = stage_weights(query["signals"], depths, calibration)
        weights = {s: w.weight for s, w in chosen.items()}
        depths = {s: w.depth for s, w in chosen.items()}
    if method == "convex":
        fused = convex_fusion({s: r[: depths[s]] for s, r in rankings.items()}, weights)
    else:
        cut = {s: [d for d, _ in r[: depths[s]]] for s, r in rankings.items()}
        fused = reciprocal_rank_fusion(cut, k=RRF_K, weights=weights)
    return [f.key for f in fused[:10]]


def evaluate(
    dump: Mapping[str, Any], method: str, calibration: Calibration | None
) -> dict[str, dict[str, float]]:
    """dataset -> split -> mean primary metric."""
    out: dict[str, dict[str, float]] = {}
    for d in dump["datasets"]:
        per_split: dict[str, list[float]] = {"dev": [], "test": []}
        for q in d["queries"]:
            ranking = fuse(q, method, calibration)
            per_split[q["split"]].append(per_query(ranking, d["qrels"][q["id"]])[d["metric"]])
        out[d["dataset"]] = {s: mean(v) if v else math.nan for s, v in per_split.items()}
    return out


# --- fit --------------------------------------------------------------------------------------


def logistic_fit(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, l2: float = 1.0, steps: int = 50
) -> tuple[float, np.ndarray]:
    """Weighted, L2-regularised logistic regression by Newton steps on standardised features;
    (bias, coefficients) on the raw scale."""
    mu, sd = x.mean(axis=0), x.std(axis=0)
    sd[sd == 0] = 1.0
    z = np.hstack([np.ones((len(x), 1)), (x - mu) / sd])
    beta = np.zeros(z.shape[1])
    penalty = np.diag([0.0, *[l2] * x.shape[1]])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-np.clip(z @ beta, -30, 30)))
        gradient = z.T @ (w * (p - y)) + penalty @ beta
        hessian = (z * (w * p * (1 - p))[:, None]).T @ z + penalty + 1e-9 * np.eye(len(beta))
        step = np.linalg.solve(hessian, gradient)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    coefficients = beta[1:] / sd
    return float(beta[0] - (coefficients * mu).sum()), coefficients


def fit_models(dump: Mapping[str, Any]) -> dict[str, StageModel]:
    models: dict[str, StageModel] = {}
    for stage, wanted in FEATURES.items():
        rows, labels, weights = [], [], []
        for d in dump["datasets"]:
            dev = [q for q in d["queries"] if q["split"] == "dev" and q["rankings"].get(stage)]
            for q in dev:
                ranking = [doc for doc, _ in q["rankings"][stage][:10]]
                rows.append(q["signals"].get(stage, {}))
                labels.append(per_query(ranking, d["qrels"][q["id"]])[d["metric"]])
                weights.append(1.0 / len(dev))  # each dataset weighs the same
        if not rows:
            continue
        present = [f for f in wanted if any(f in r for r in rows)]
        defaults = {f: float(mean(r[f] for r in rows if f in r)) for f in present}
        # Laplace's prior: one relevant and one irrelevant pseudo-query at the mean signals,
        # so a stage seen on few dev queries stays near an even chance instead of a certainty
        rows += [defaults, defaults]
        labels += [1.0, 0.0]
        weights += [mean(weights)] * 2
        x = np.array([[r.get(f, defaults[f]) for f in present] for r in rows], dtype=np.float64)
        w = np.array(weights) * len(rows) / sum(weights)
        bias, coefficients = logistic_fit(x.reshape(len(rows), len(present)), np.array(labels), w)
        models[stage] = StageModel(
            round(bias, 4),
            {f: round(float(c), 4) for f, c in zip(present, coefficients, strict=True)},
            {f: round(v, 4) for f, v in defaults.items()},
        )
    return models


def macro(scores: Mapping[str, Mapping[str, float]], split: str) -> float:
    return mean(s[split] for s in scores.values() if not math.isnan(s[split]))


def fit(dump: Mapping[str, Any]) -> tuple[Calibration, list[tuple[Any, ...]]]:
    models = fit_models(dump)
    names = ", ".join(d["dataset"] for d in dump["datasets"])
    grid: list[tuple[Any, ...]] = []
    for sharpness in SHARPNESS:
        for floor in DEPTH_FLOORS:
            for followers in FOLLOWERS:
                for exponent in FOLLOW_EXPONENTS if followers else (1.0,):
                    calibration = Calibration(models, sharpness, floor, "", followers, exponent)
                    score = macro(evaluate(dump, "weighted-rrf", calibration), "dev")
                    grid.append((score, sharpness, floor, followers, exponent))
    best = max(grid, key=lambda g: (g[0], -abs(g[1] - 1)))
    source = f"benchmark dev split ({names}); python -m benchmark.calibrate"
    return Calibration(models, best[1], best[2], source, best[3], best[4]), grid


def table(dump: Mapping[str, Any], calibration: Calibration) -> str:
    stages = sorted({s for d in dump["datasets"] for q in d["queries"] for s in q["rankings"]})
    methods = [*(f"only:{s}" for s in stages), "rrf", "weighted-rrf", "convex"]
    results = {m: evaluate(dump, m, calibration) for m in methods}
    lines = [
        "| dataset (metric) | " + " | ".join(methods) + " |",
        "|---|" + "---|" * len(methods),
    ]
    for d in dump["datasets"]:
        cells = [
            f"{results[m][d['dataset']]['test']:.3f} ({results[m][d['dataset']]['dev']:.3f})"
            for m in methods
        ]
        lines.append(f"| {d['dataset']} ({d['metric']}) | " + " | ".join(cells) + " |")
    lines.append(
        "| macro | " + " | ".join(
            f"{macro(results[m], 'test'):.3f} ({macro(results[m], 'dev'):.3f})" for m in methods
        ) + " |"
    )  # fmt: skip
    return "\n".join(["test split (dev in brackets)", "", *lines])


# --- command line -----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    from benchmark.__main__ import default_cache

    parser = argparse.ArgumentParser(prog="python -m benchmark.calibrate", description=__doc__)
    parser.add_argument("--datasets", default=DEFAULT_DATASETS)
    parser.add_argument("--dump", type=Path, default=ROOT / "bench-out" / "calibration-dump.json")
    parser.add_argument("--collect", action="store_true", help="(re)run the pipeline first")
    parser.add_argument(
        "--subset", action="store_true", help="every query, ≥ 600 documents per dataset"
    )
    parser.add_argument(
        "--max-queries", type=int, default=None, help="per split and dataset (default: all)"
    )
    parser.add_argument("--write", action="store_true", help=f"write {CALIBRATION_FILE.name}")
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "datasets")
    parser.add_argument("--cache", type=Path, default=default_cache())
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.collect or not args.dump.exists():
        from knowmind.logging import configure_logging

        configure_logging("json", "warning")
        with tempfile.TemporaryDirectory(prefix="knowmind-calibrate-") as tmp:
            args.tmp = Path(tmp)
            dump = asyncio.run(collect(args))
        args.dump.parent.mkdir(parents=True, exist_ok=True)
        args.dump.write_text(json.dumps(dump))
    dump = json.loads(args.dump.read_text())
    calibration, grid = fit(dump)
    best = max(grid)
    print(f"grid best: dev macro {best[0]:.4f} (sharpness, floor, followers, exponent) {best[1:]}")
    for row in sorted(grid, reverse=True)[:8]:
        print(f"  {row[0]:.4f} {row[1:]}")
    print(json.dumps(calibration.to_json(), indent=1))
    report = table(dump, calibration)
    print(report)
    (args.dump.parent / "calibration.md").write_text(report + "\n")
    if args.write:
        CALIBRATION_FILE.write_text(json.dumps(calibration.to_json(), indent=1) + "\n")
        print(f"wrote {CALIBRATION_FILE}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
