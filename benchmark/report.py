"""report.md and PNG plots from results.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark.report_quality import calibration_section, kinds_section
from benchmark.scale_report import write_scale_report

__all__ = ["write_report"]

METRICS = ("ndcg@10", "recall@1", "recall@5", "recall@10", "mrr@10")
# Measured before the benchmark existed, same offline model (from the benchmark issue).
REFERENCE = {
    "xquad-de": {"txtai-bb25": 0.971, "lancedb-hybrid": 0.968, "vector": 0.956, "hybrid": 0.961},
    "xquad-en-de": {"txtai-bb25": 0.846, "lancedb-hybrid": 0.844, "vector": 0.919, "hybrid": 0.668},
    "dbpedia": {"vector": 0.524, "lancedb-hybrid": 0.480},
}
REFERENCE_MUSIQUE_R5 = {"vector": 0.617, "txtai-bb25": 0.619}


SUMMARY_SYSTEMS = (
    "fulltext", "vector", "hybrid", "knowmind", "knowmind-rrf",
    "knowmind-no-bm25", "knowmind-no-vector", "knowmind-no-graph", "knowmind-no-identity",
    "knowmind-no-relations", "knowmind-no-time", "knowmind-no-speaker", "knowmind-no-typo",
    "knowmind-no-compounds",
    "knowmind-no-query-language", "txtai-bb25", "lancedb-hybrid",
)  # fmt: skip


def _split_value(result: dict[str, Any], part: str, metric: str) -> str:
    value = result.get("splits", {}).get(part, {}).get(metric)
    return "–" if value is None else f"{value:.3f}"


def _summary(results: dict[str, Any]) -> list[str]:
    """One row per dataset: each system's primary metric on the test split (dev in brackets)."""
    datasets = results["datasets"]
    present = [
        s for s in SUMMARY_SYSTEMS if any(d["systems"].get(s, {}).get("metrics") for d in datasets)
    ]
    lines = [
        "## Summary: test split (dev split in brackets)",
        "",
        "Primary metric: nDCG@10; MuSiQue and LoCoMo recall@5; the relation corpus hits@3 (the "
        "memory that states the answer in the top 3). The ranker is trained on the dev split "
        "only; `knowmind-rrf` is the same stages in their fused (RRF) order.",
        "",
        "| dataset | " + " | ".join(present) + " |",
        "|---|" + "---|" * len(present),
    ]
    for d in datasets:
        metric = d.get("primary_metric", "ndcg@10")
        cells = []
        for system in present:
            result = d["systems"].get(system)
            if not result or not result.get("metrics"):
                cells.append("–")
                continue
            cells.append(
                f"{_split_value(result, 'test', metric)} ({_split_value(result, 'dev', metric)})"
            )
        lines.append(f"| {d['dataset']} ({metric}) | " + " | ".join(cells) + " |")
    return [
        *lines,
        "",
        *_typo_share(datasets),
        *_significance_table(datasets),
        *calibration_section(datasets),
    ]


def _typo_share(datasets: list[dict[str, Any]]) -> list[str]:
    by_name = {d["dataset"]: d for d in datasets}
    lines = []
    for name, d in by_name.items():
        clean = by_name.get(name.removesuffix("-typo")) if name.endswith("-typo") else None
        if clean is None:
            continue
        cells = []
        for system in ("fulltext", "vector", "knowmind"):
            typo = d["systems"].get(system, {}).get("splits", {})
            base = clean["systems"].get(system, {}).get("splits", {})
            parts = []
            for part in ("test", "dev"):
                t, c = typo.get(part, {}).get("ndcg@10"), base.get(part, {}).get("ndcg@10")
                if t is not None and c:
                    parts.append(f"{part} {t:.3f}/{c:.3f} = {100 * t / c:.1f} %")
            if parts:
                cells.append(f"{system}: " + ", ".join(parts))
        lines += [
            f"Typo set {name}: nDCG@10 with one typo per question as a share of clean — "
            + "; ".join(cells)
            + " (target for the bm25 stage: ≥ 90 %).",
            "",
        ]
    return lines


def _significance_table(datasets: list[dict[str, Any]]) -> list[str]:
    lines = [
        "Paired randomisation test (sign flips, 20,000 rounds, fixed seed) of knowmind against "
        "the vector stage and the best peer, per split: mean difference, two-sided p, and "
        "per-query wins/losses/ties of knowmind.",
        "",
        "| dataset | rival | test Δ | test p | test W/L/T | dev Δ | dev p | dev W/L/T |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in datasets:
        for label, test in d.get("significance", {}).items():
            if label == "metric":
                continue
            cells = []
            for part in ("test", "dev"):
                r = test.get(part, {})
                if not r.get("queries"):
                    cells += ["–", "–", "–"]
                    continue
                cells += [
                    f"{r['diff']:+.4f}",
                    f"{r['p_value']:.4f}",
                    f"{r['wins']}/{r['losses']}/{r['ties']}",
                ]
            lines.append(f"| {d['dataset']} | {test['system']} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def _table(dataset: dict[str, Any]) -> list[str]:
    metric = dataset.get("primary_metric", "ndcg@10")
    lines = [
        "| system | "
        + " | ".join(METRICS)
        + f" | dev {metric} | test {metric} | p50 ms | p95 ms | notes |",
        "|---|" + "---|" * (len(METRICS) + 5),
    ]
    ranked = sorted(dataset["systems"].items(), key=lambda kv: -kv[1]["metrics"].get("ndcg@10", -1))
    for name, result in ranked:
        metrics = result["metrics"]
        latency = result["latency_ms"].get("total") or result["latency_ms"].get("search") or {}
        cells = [f"{metrics[m]:.3f}" if m in metrics else "–" for m in METRICS]
        cells += [_split_value(result, part, metric) for part in ("dev", "test")]
        notes = "; ".join(result["notes"])[:120]
        lines.append(
            f"| {name} | "
            + " | ".join(cells)
            + f" | {latency.get('p50', '–')} | {latency.get('p95', '–')} | {notes} |"
        )
    return lines


def _reference(dataset: dict[str, Any]) -> list[str]:
    name = dataset["dataset"]
    if name == "musique":
        refs, metric = REFERENCE_MUSIQUE_R5, "recall@5"
    elif name in REFERENCE:
        refs, metric = REFERENCE[name], "ndcg@10"
    else:
        return []
    rows = [
        f"Reference ({metric}, measured earlier on the full set): "
        + ", ".join(f"{system} {value:.3f}" for system, value in refs.items())
    ]
    return ["", *rows]


def _plots(results: dict[str, Any], out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ["(plots skipped: matplotlib is not installed — it comes with the `bench` extra)"]
    names = []
    datasets = results["datasets"]
    systems = sorted({s for d in datasets for s, r in d["systems"].items() if r["metrics"]})
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(datasets)), 5))
    width = 0.8 / max(len(systems), 1)
    for i, system in enumerate(systems):
        values = [
            d["systems"].get(system, {}).get("metrics", {}).get("ndcg@10", 0) for d in datasets
        ]
        ax.bar([x + i * width for x in range(len(datasets))], values, width, label=system)
    ax.set_xticks(
        [x + 0.4 - width / 2 for x in range(len(datasets))], [d["dataset"] for d in datasets]
    )
    ax.set_ylabel("nDCG@10")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("Quality per system and dataset")
    fig.tight_layout()
    fig.savefig(out / "quality.png", dpi=110)
    names.append("![quality](quality.png)")
    plt.close("all")
    return names


def write_report(results: dict[str, Any], out: Path) -> None:
    env = results["environment"]
    caps = results["capabilities"]
    lines = [
        "# knowmind benchmark",
        "",
        f"Command: `{results['command']}` — {results['runtime_s']} s "
        f"({'quick subset' if results['quick'] else 'full datasets'}).",
        f"Environment: {env['cpu']} ({env['cores']} cores), Python {env['python']}, "
        f"knowmind {env['knowmind']} at {env['git_commit']}.",
        f"Embedder: {caps['embedder']['model']} ({caps['embedder']['dim']}-d). "
        f"Reranker: {'active' if caps['reranker']['active'] else 'none — '}"
        f"{'' if caps['reranker']['active'] else caps['reranker']['reason']}.",
        "All systems use the same embeddings (cached by text hash). knowmind systems and the "
        "baselines run through the real recall pipeline with a subset of its stages; `filename` "
        "ranks by trigram similarity of titles; peers index the same texts and vectors.",
        "Queries are split by sha1(dataset:query id): one in three is dev, the rest test.",
        "",
        *_summary(results),
    ]
    for dataset in results["datasets"]:
        ingest = dataset["ingest"]
        lines += [
            f"## {dataset['dataset']} ({dataset['documents']} documents, "
            f"{dataset['queries']} queries, full text `{dataset['language']}`)",
            "",
            f"Ingest: {ingest['docs_per_s']} documents/s through the memory service; "
            f"extraction finished after {ingest['extraction_done_s']} s.",
            "",
            *_table(dataset),
            *_reference(dataset),
            "",
            *kinds_section(dataset),
        ]
    if results.get("scale"):
        lines += write_scale_report(results["scale"], out)
    lines += _plots(results, out)
    (out / "report.md").write_text("\n".join(lines) + "\n")
