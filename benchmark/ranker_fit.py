"""Fit the learned ranker on collected features (``benchmark.train_ranker --fit``): LightGBM
LambdaRank over the dev questions, trees chosen by cross-validation, an isotonic calibration of
the out-of-fold scores, the model written into the package and a report into ``docs/``."""

from __future__ import annotations

import itertools
import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any

import numpy as np

from benchmark.metrics import per_query
from benchmark.stats import primary_metric
from knowmind.recall.features import FEATURE_NAMES
from knowmind.recall.ranker import META_FILE, MODEL_FILE

ROOT = Path(__file__).resolve().parent.parent
REPORT = ROOT / "docs" / "ranker.md"
FOLDS = 5
SEED = 20261206
MAX_ROUNDS = 600
PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "eval_at": [5, 10],
    "learning_rate": 0.05,
    "num_leaves": 15,
    "min_data_in_leaf": 100,
    "min_sum_hessian_in_leaf": 1e-3,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "lambda_l2": 1.0,
    "lambdarank_truncation_level": 20,
    "num_threads": 1,
    "deterministic": True,
    "force_row_wise": True,
    "seed": SEED,
    "verbosity": -1,
}
# Prior knowledge the trees must respect: a memory the vector stage or fusion ranks better (or
# scores higher) never scores lower for it, all else equal. It keeps a stage's clear find from
# being buried by an interaction learned from a few questions; chosen, like the rest, by the
# leave-one-family-out and 5-fold quality on the dev questions.
MONOTONE = {"vector_score": 1, "cosine": 1, "rrf": 1, "rrf_rank": -1, "vector_rank": -1}
PARAMS["monotone_constraints"] = [MONOTONE.get(name, 0) for name in FEATURE_NAMES]
PARAMS["monotone_constraints_method"] = "advanced"
CALIBRATION_KNOTS = 200
# A dataset's total weight grows with its dev questions to this power: 0.5, between every
# dataset weighing the same (0: a 15-question set weighs as much as one of 750, and the model
# learns it by heart) and every question (1); chosen, with min_data_in_leaf, by how well a model
# trained without a dataset family ranks it (leave-one-family-out on the dev questions).
WEIGHT_POWER = 0.5


@dataclass(slots=True)
class Questions:
    """The dump as arrays: one row per candidate, questions contiguous."""

    x: np.ndarray
    label: np.ndarray
    fused: np.ndarray
    weight: np.ndarray  # per candidate: its dataset's weight per question
    group: list[int]  # candidates per question
    rows: list[dict[str, Any]]  # per question: dataset, id, kind, split, gold, sources

    def subset(self, questions: Sequence[int]) -> Questions:
        starts = np.cumsum([0, *self.group])
        index = np.concatenate([np.arange(starts[q], starts[q + 1]) for q in questions])
        return Questions(
            self.x[index],
            self.label[index],
            self.fused[index],
            self.weight[index],
            [self.group[q] for q in questions],
            [self.rows[q] for q in questions],
        )


def to_arrays(dump: Sequence[Mapping[str, Any]]) -> Questions:
    """The dump as arrays; each dataset weighs ``questions ** WEIGHT_POWER`` in all."""
    per_dataset = defaultdict(int)
    for row in dump:
        per_dataset[row["dataset"]] += 1
    # scaled so that a question weighs 1 on average
    scale = sum(per_dataset.values()) / sum(n**WEIGHT_POWER for n in per_dataset.values())
    x, label, fused, weight, group, rows = [], [], [], [], [], []
    for row in dump:
        candidates = row["candidates"]
        if not candidates:
            continue
        count = per_dataset[row["dataset"]]
        dataset_weight = scale * count**WEIGHT_POWER / count
        for c in candidates:
            x.append([math.nan if v is None else v for v in c["features"]])
            label.append(c["label"])
            fused.append(c["fused"])
            weight.append(dataset_weight)
        group.append(len(candidates))
        rows.append({**{k: row[k] for k in ("dataset", "id", "kind", "split", "qrels")},
                     "sources": [c["source"] for c in candidates]})  # fmt: skip
    return Questions(
        np.array(x, dtype=np.float64),
        np.array(label, dtype=np.int32),
        np.array(fused, dtype=np.float64),
        np.array(weight, dtype=np.float64),
        group,
        rows,
    )


def train(data: Questions, rounds: int, params: Mapping[str, Any] = PARAMS) -> Any:
    import lightgbm as lgb

    train_set = lgb.Dataset(
        data.x, data.label, weight=data.weight, group=data.group, feature_name=list(FEATURE_NAMES)
    )
    return lgb.train(dict(params), train_set, num_boost_round=rounds)


def folds_of(data: Questions, folds: int = FOLDS) -> list[list[int]]:
    """Questions dealt into folds by a seeded shuffle, each dataset spread evenly."""
    rng = np.random.default_rng(SEED)
    by_dataset: dict[str, list[int]] = defaultdict(list)
    for i, row in enumerate(data.rows):
        by_dataset[row["dataset"]].append(i)
    dealt: list[list[int]] = [[] for _ in range(folds)]
    for questions in by_dataset.values():
        for j, q in enumerate(rng.permutation(questions)):
            dealt[j % folds].append(int(q))
    return [sorted(f) for f in dealt]


def cross_validate(data: Questions) -> tuple[int, np.ndarray]:
    """(best number of trees by mean out-of-fold primary metric, out-of-fold scores at it)."""
    steps = list(range(50, MAX_ROUNDS + 1, 50))
    oof = {s: np.zeros(len(data.label)) for s in steps}
    starts = np.cumsum([0, *data.group])
    for fold in folds_of(data):
        held = set(fold)
        model = train(data.subset([q for q in range(len(data.group)) if q not in held]), steps[-1])
        test = data.subset(fold)
        for s in steps:
            scores = model.predict(test.x, num_iteration=s)
            offset = 0
            for q, size in zip(fold, test.group, strict=True):
                oof[s][starts[q] : starts[q] + size] = scores[offset : offset + size]
                offset += size
    quality = {s: macro_quality(data, oof[s]) for s in steps}
    best = max(steps, key=lambda s: (round(quality[s], 4), -s))
    return best, oof[best]


def rankings(data: Questions, scores: np.ndarray) -> list[list[str]]:
    """Each question's sources ordered by ``scores`` (ties: the collected, fused order)."""
    out, start = [], 0
    for size, row in zip(data.group, data.rows, strict=True):
        part = scores[start : start + size]
        order = sorted(range(size), key=lambda i: (-part[i], i))
        out.append([row["sources"][i] for i in order])
        start += size
    return out


def per_dataset_quality(data: Questions, scores: np.ndarray) -> dict[str, float]:
    """Mean primary metric per dataset (gold outside the short list counts as missed)."""
    found: dict[str, list[float]] = defaultdict(list)
    for ranking, row in zip(rankings(data, scores), data.rows, strict=True):
        metric = primary_metric(row["dataset"])
        found[row["dataset"]].append(per_query(ranking, row["qrels"])[metric])
    return {name: mean(values) for name, values in found.items()}


def macro_quality(data: Questions, scores: np.ndarray) -> float:
    return mean(per_dataset_quality(data, scores).values())


def calibration(raw: np.ndarray, relevant: np.ndarray) -> dict[str, list[float]]:
    """Isotonic regression of relevance on the raw score, kept as at most
    ``CALIBRATION_KNOTS`` knots of a piecewise-linear map."""
    from scipy.optimize import isotonic_regression

    order = np.argsort(raw, kind="stable")
    fitted = isotonic_regression(relevant[order].astype(np.float64)).x
    xs, ys = raw[order], fitted
    picks = np.unique(np.linspace(0, len(xs) - 1, CALIBRATION_KNOTS).round().astype(int))
    return {
        "x": [round(float(xs[i]), 6) for i in picks],
        "y": [round(float(ys[i]), 6) for i in picks],
    }


def reliability(
    probability: np.ndarray, relevant: np.ndarray, bins: int = 10
) -> list[dict[str, float]]:
    """Per probability bin: how many candidates, their mean probability, the relevant share."""
    out = []
    edges = np.linspace(0, 1, bins + 1)
    for low, high in itertools.pairwise(edges):
        inside = (probability >= low) & ((probability < high) | (high == 1.0))
        if inside.any():
            out.append({
                "bin": f"{low:.1f}–{high:.1f}",
                "candidates": int(inside.sum()),
                "mean_probability": round(float(probability[inside].mean()), 3),
                "relevant_share": round(float(relevant[inside].mean()), 3),
            })  # fmt: skip
    return out


def fit_and_report(dump: Sequence[Mapping[str, Any]], write: bool, out_dir: Path) -> dict[str, Any]:
    dev = to_arrays([row for row in dump if row["split"] == "dev"])
    rounds, oof = cross_validate(dev)
    relevant = (dev.label > 0).astype(np.float64)
    calib = calibration(oof, relevant)
    probability = np.clip(np.interp(oof, calib["x"], calib["y"]), 0, 1)
    model = train(dev, rounds)
    vector = np.nan_to_num(-dev.x[:, FEATURE_NAMES.index("vector_rank")], nan=-1e9)
    summary = {
        "trees": rounds,
        "questions": len(dev.group),
        "candidates": len(dev.label),
        "trained_on": dict(sorted(_counts(dev).items())),
        "cv_quality": {
            "ranker": _rounded(per_dataset_quality(dev, oof)),
            "fused": _rounded(per_dataset_quality(dev, dev.fused)),
            "vector": _rounded(per_dataset_quality(dev, vector)),
        },
        "importance_gain": _importance(model),
        "reliability": reliability(probability, relevant),
    }
    meta = {"features": list(FEATURE_NAMES), "calibration": calib, "params": PARAMS, **summary}
    (out_dir / "ranker_fit.json").write_text(json.dumps(meta, indent=1))
    if write:
        MODEL_FILE.parent.mkdir(parents=True, exist_ok=True)
        MODEL_FILE.write_text(model.model_to_string())
        META_FILE.write_text(json.dumps(meta, indent=1) + "\n")
        REPORT.write_text(report(summary))
    _print_summary(summary)
    return summary


def _counts(data: Questions) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for row in data.rows:
        counts[row["dataset"]] += 1
    return counts


def _rounded(values: Mapping[str, float]) -> dict[str, float]:
    return {k: round(v, 4) for k, v in sorted(values.items())}


def _importance(model: Any) -> dict[str, float]:
    gains = model.feature_importance(importance_type="gain")
    total = float(gains.sum()) or 1.0
    ranked = sorted(zip(FEATURE_NAMES, gains, strict=True), key=lambda kv: -kv[1])
    return {name: round(float(g) / total, 4) for name, g in ranked}


def _print_summary(summary: Mapping[str, Any]) -> None:
    print(f"trees: {summary['trees']}, questions: {summary['questions']}")
    quality = summary["cv_quality"]
    for dataset in quality["ranker"]:
        print(
            f"  {dataset:16s} ranker {quality['ranker'][dataset]:.4f}  "
            f"fused {quality['fused'][dataset]:.4f}  vector {quality['vector'][dataset]:.4f}"
        )
    top = list(summary["importance_gain"].items())[:12]
    print("  importance:", ", ".join(f"{k} {v:.3f}" for k, v in top))


def report(summary: Mapping[str, Any]) -> str:
    """docs/ranker.md: what the shipped ranker was trained on and what it reads."""
    quality = summary["cv_quality"]
    lines = [
        "# The learned ranker",
        "",
        "Generated by `make train-ranker` (`python -m benchmark.train_ranker --collect --fit "
        "--write`); the quality on the test split is in the benchmark report "
        "([benchmark.md](benchmark.md)).",
        "",
        f"LightGBM LambdaRank, {summary['trees']} trees, trained on the dev split only: "
        f"{summary['questions']} questions, {summary['candidates']} candidates "
        f"({', '.join(f'{k} {v}' for k, v in summary['trained_on'].items())}); each dataset "
        "weighs its number of questions to the power 0.5 (a small set does not weigh as much as a "
        "large one, nor so little that it is ignored); better vector and fused ranks never lower "
        "a score (monotone constraints). Trees chosen by 5-fold cross-validation over the dev "
        "questions.",
        "",
        "## Cross-validated quality on dev (primary metric, out-of-fold)",
        "",
        "| dataset | ranker | fused order (RRF) | vector stage |",
        "|---|---|---|---|",
    ]
    for dataset, value in quality["ranker"].items():
        lines.append(
            f"| {dataset} | {value:.4f} | {quality['fused'][dataset]:.4f} | "
            f"{quality['vector'][dataset]:.4f} |"
        )
    lines += [
        "",
        "## Feature importance (share of the total gain)",
        "",
        "| feature | gain |",
        "|---|---|",
        *(f"| `{k}` | {v:.3f} |" for k, v in summary["importance_gain"].items() if v > 0),
        "",
        "## Calibration (reliability of the score, out-of-fold on dev)",
        "",
        "A score is the probability that the memory answers the question. Per bin of scores:",
        "",
        "| score | candidates | mean score | share relevant |",
        "|---|---|---|---|",
        *(
            f"| {b['bin']} | {b['candidates']} | {b['mean_probability']:.3f} | "
            f"{b['relevant_share']:.3f} |"
            for b in summary["reliability"]
        ),
        "",
    ]
    return "\n".join(lines)
