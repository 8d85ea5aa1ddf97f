"""Sections of report.md about the ranker's output: quality per question kind (LoCoMo's
categories, the relation corpus's hops) and how well the scores are calibrated, on the test
split."""

from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import Any

from benchmark.stats import split_of

__all__ = ["calibration_section", "kinds_section"]

KIND_SYSTEMS = (
    "fulltext", "vector", "hybrid", "knowmind-rrf", "knowmind-no-time", "knowmind-no-speaker",
    "knowmind",
)  # fmt: skip
KIND_METRICS = {"relations": ("hits@1", "hits@3"), "locomo": ("recall@5", "recall@10", "ndcg@10")}
BINS = 10


def kinds_section(dataset: dict[str, Any]) -> list[str]:
    """Per question kind, each system's metrics on the test split (datasets with kinds)."""
    name = dataset["dataset"]
    metrics = KIND_METRICS.get(name)
    systems = [s for s in (*KIND_SYSTEMS, *_peers(dataset)) if s in dataset["systems"]]
    if not metrics or not systems:
        return []
    rows: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for system in systems:
        for qid, result in dataset["systems"][system].get("per_query", {}).items():
            if split_of(name, qid) == "test":
                rows[result.get("kind") or "all"][system].append(result)
    header = " | ".join(f"{s} {m}" for s in systems for m in metrics)
    lines = [
        f"Test split by question kind ({name}):",
        "",
        f"| kind | questions | {header} |",
        "|---|---|" + "---|" * (len(systems) * len(metrics)),
    ]
    for kind in sorted(rows):
        count = len(next(iter(rows[kind].values())))
        cells = [
            f"{mean(r[m] for r in rows[kind][s]):.3f}" if rows[kind][s] else "–"
            for s in systems
            for m in metrics
        ]
        lines.append(f"| {kind} | {count} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _peers(dataset: dict[str, Any]) -> list[str]:
    return [s for s in dataset["systems"] if s in ("txtai-bb25", "lancedb-hybrid")]


def calibration_section(datasets: list[dict[str, Any]]) -> list[str]:
    """knowmind's scores on the test split: per score bin, the share of results that are
    relevant; and the share among results scoring at least 0.5."""
    pairs: list[tuple[float, bool]] = []
    per_dataset: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for d in datasets:
        ours = d["systems"].get("knowmind", {}).get("per_query", {})
        for qid, result in ours.items():
            if split_of(d["dataset"], qid) != "test":
                continue
            for score, relevant in zip(
                result.get("scores", []), result.get("relevant", []), strict=False
            ):
                pairs.append((score, relevant))
                per_dataset[d["dataset"]].append((score, relevant))
    if not pairs:
        return []
    lines = [
        "## Scores (test split)",
        "",
        "Every result's `score` is the ranker's calibrated probability that it answers the "
        "question. Among the top-10 results of every test question:",
        "",
        "| score | results | mean score | share relevant |",
        "|---|---|---|---|",
    ]
    for low in range(BINS):
        inside = [
            (s, r)
            for s, r in pairs
            if low / BINS <= s < (low + 1) / BINS or (low == BINS - 1 and s == 1.0)
        ]
        if inside:
            lines.append(
                f"| {low / BINS:.1f}–{(low + 1) / BINS:.1f} | {len(inside)} | "
                f"{mean(s for s, _ in inside):.3f} | {mean(r for _, r in inside):.3f} |"
            )
    lines += [
        "",
        "Results scoring ≥ 0.5, per dataset: how many, and the share that is relevant.",
        "",
    ]
    lines += ["| dataset | results ≥ 0.5 | share relevant |", "|---|---|---|"]
    for name, values in [*per_dataset.items(), ("all", pairs)]:
        high = [r for s, r in values if s >= 0.5]
        share = f"{mean(high):.3f}" if high else "–"
        lines.append(f"| {name} | {len(high)} | {share} |")
    return [*lines, ""]
