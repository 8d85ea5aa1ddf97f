"""The generated parts of README.md and docs/, each written by the command that measures it.

    python scripts/docs.py settings                       # docs/settings.md's table (make docs)
    python scripts/docs.py benchmark --quality BENCH_OUT   # after make bench
    python scripts/docs.py benchmark --scale BENCH_OUT     # after make bench-scale
    python scripts/docs.py headline                       # README's block from summary.json

``benchmark`` publishes a run: ``--quality`` takes BENCH_OUT/report.md, results.json and
quality.png (and the scale part the same run measured, when it has one), ``--scale`` takes
BENCH_OUT/scale.md, scale.json and scale_latency.png. The report replaces its section of
docs/benchmark.md, the plots go to docs/benchmark/, the figures the README shows are kept in
docs/benchmark/summary.json, and the README's headline is rendered from that file. Commit
hashes are left out: the docs show the current state, git keeps the history.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PEERS = ("txtai-bb25", "lancedb-hybrid")
HEADLINE_SYSTEMS = ("knowmind", "vector", "fulltext")
SHA = re.compile(r"(?:\s(?:at|commit))?\s*\b[0-9a-f]{40}\b")
#: A path of the measuring machine in a command line (--out /tmp/x → --out OUT).
MACHINE_PATHS = re.compile(r"(--out|--data-dir) (?:/|\.\./)[^\s`]*")


def replace_block(text: str, name: str, body: str) -> str:
    """``text`` with what lies between ``<!-- name:start ... -->`` and ``<!-- name:end -->``
    replaced by ``body`` (the markers stay)."""
    start = text.index(f"<!-- {name}:start")
    start = text.index("\n", start) + 1
    end = text.index(f"<!-- {name}:end -->")
    return text[:start] + body.rstrip("\n") + "\n" + text[end:]


def block(text: str, name: str) -> str:
    start = text.index(f"<!-- {name}:start")
    start = text.index("\n", start) + 1
    return text[start : text.index(f"<!-- {name}:end -->")]


# --- settings -------------------------------------------------------------------------------


def write_settings(docs: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from knowmind.settings import settings_table

    path = docs / "settings.md"
    path.write_text(replace_block(path.read_text(), "settings", settings_table()))


# --- benchmark ------------------------------------------------------------------------------


def _demote(lines: list[str]) -> list[str]:
    return ["#" + line if line.startswith("#") else line for line in lines]


def _clean(text: str, plots: dict[str, str]) -> str:
    """A report as the docs keep it: no commit hash, the plots under docs/benchmark/."""
    text = SHA.sub("", text)
    text = MACHINE_PATHS.sub(
        lambda m: f"{m.group(1)} {m.group(1)[2:].replace('-', '_').upper()}", text
    )
    for name, target in plots.items():
        text = text.replace(f"]({name})", f"]({target})")
    return text


def _split_scale(report: str) -> tuple[str, str | None]:
    """report.md → (its quality part without the title, its scale part or None)."""
    lines = report.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    if "## Scale" not in lines:
        return "\n".join(lines), None
    at = lines.index("## Scale")
    rest = lines[at + 1 :]
    end = next((i for i, line in enumerate(rest) if line.startswith("## ")), None)
    plots = [line for line in rest if line.startswith("![quality]")]
    scale = rest if end is None else rest[:end]
    scale = [line for line in scale if not line.startswith("![quality]")]
    quality = lines[:at] + ([] if end is None else rest[end:]) + plots
    return "\n".join(quality), "\n".join(scale)


def quality_summary(results: dict[str, Any]) -> dict[str, Any]:
    """The test-split figures the README shows: per dataset knowmind, the vector and BM25 stages
    alone, and the best peer."""
    rows = []
    for dataset in results["datasets"]:
        metric = dataset.get("primary_metric", "ndcg@10")
        systems = dataset["systems"]

        def test(system: str, systems: dict[str, Any] = systems, metric: str = metric) -> Any:
            return systems.get(system, {}).get("splits", {}).get("test", {}).get(metric)

        peers = [(test(p), p) for p in PEERS if test(p) is not None]
        best = max(peers) if peers else (None, None)
        rows.append(
            {
                "dataset": dataset["dataset"],
                "metric": metric,
                **{system: test(system) for system in HEADLINE_SYSTEMS},
                "best_peer": best[1],
                "best_peer_value": best[0],
            }
        )
    env, caps = results["environment"], results["capabilities"]
    return {
        "datasets": rows,
        "quick": results.get("quick", False),
        "cores": env.get("cores"),
        "cpu": env.get("cpu"),
        "embedder": caps["embedder"]["model"],
        "reranker": bool(caps["reranker"]["active"]),
    }


def scale_summary(scale: dict[str, Any]) -> dict[str, Any]:
    """The largest tenant with one client: cached and live query embedding."""
    runs = [r for r in scale["runs"] if r["concurrency"] == 1]
    largest = max(r["tenant_chunks"] for r in runs)
    one = {r["embedding"]: r for r in runs if r["tenant_chunks"] == largest}
    cached, live = one.get("cached", {}), one.get("live", {})
    return {
        "layout": scale["layout"],
        "corpus_chunks": scale["corpus"]["chunks"],
        "tenants": scale["corpus"]["tenants"],
        "tenant_chunks": largest,
        "p50_ms": cached.get("p50_ms"),
        "p95_ms": cached.get("p95_ms"),
        "live_p50_ms": live.get("p50_ms"),
        "embed_p50_ms": live.get("stages_p50_ms", {}).get("embed"),
        "smallest": min(
            (r for r in runs if r["embedding"] == "cached"), key=lambda r: r["tenant_chunks"]
        )["p50_ms"],
    }


def _headline_plot(quality: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = quality["datasets"]
    series = [("knowmind", "knowmind"), ("vector", "vector stage alone")]
    series += [("fulltext", "BM25 stage alone"), ("best_peer_value", "best peer")]
    fig, ax = plt.subplots(figsize=(max(7.0, 1.1 * len(rows)), 3.6))
    width = 0.8 / len(series)
    for i, (key, label) in enumerate(series):
        values = [row.get(key) or 0 for row in rows]
        ax.bar([x + i * width for x in range(len(rows))], values, width, label=label)
    ax.set_xticks(
        [x + 0.4 - width / 2 for x in range(len(rows))],
        [f"{row['dataset']}\n{row['metric']}" for row in rows],
        fontsize=7,
    )
    ax.set_ylim(0, 1)
    ax.set_ylabel("test split")
    ax.legend(fontsize=7, ncol=4, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close("all")
    return True


def _figure(value: Any, bold: bool = False) -> str:
    if value is None:
        return "–"
    return f"**{value:.3f}**" if bold else f"{value:.3f}"


def render_headline(summary: dict[str, Any]) -> str:
    lines = []
    quality = summary.get("quality")
    if quality:
        lines += [
            f"`make bench` on {quality['cores']} cores ({quality['embedder']}, "
            f"{'a reranker' if quality['reranker'] else 'no reranker'}"
            f"{', quick subsets' if quality['quick'] else ''}), test split; every system and "
            "dataset, the scale runs and the method: [docs/benchmark.md](docs/benchmark.md).",
            "",
            "| dataset (metric) | knowmind | vector alone | BM25 alone | best peer |",
            "|---|---|---|---|---|",
        ]
        for row in quality["datasets"]:
            values = [row[s] for s in HEADLINE_SYSTEMS] + [row["best_peer_value"]]
            best = max((v for v in values if v is not None), default=None)
            cells = [_figure(v, bold=v is not None and v == best) for v in values]
            if row["best_peer"] is not None:
                cells[-1] += f" ({row['best_peer']})"
            lines.append(f"| {row['dataset']} ({row['metric']}) | " + " | ".join(cells) + " |")
        lines.append("")
    scale = summary.get("scale")
    if scale:
        lines += [
            f"At scale (`make bench-scale`, layout `{scale['layout']}`: {scale['corpus_chunks']:,} "
            f"chunks in {scale['tenants']:,} tenants), a recall of the "
            f"{scale['tenant_chunks']:,}-chunk tenant takes {scale['p50_ms']} ms p50 / "
            f"{scale['p95_ms']} ms p95 with the query's embedding cached, {scale['live_p50_ms']} "
            f"ms p50 embedding it ({scale['embed_p50_ms']} ms of that); a 100-chunk tenant's "
            f"{scale['smallest']} ms p50.",
            "",
        ]
    if summary.get("plot"):
        lines.append(
            "![knowmind against the vector and BM25 stages alone and the best peer, test split]"
            "(docs/benchmark/headline.png)"
        )
    return "\n".join(lines).rstrip("\n") + "\n"


def publish(bench_out: Path, docs: Path, readme: Path, *, quality: bool, scale: bool) -> None:
    plots_dir = docs / "benchmark"
    plots_dir.mkdir(parents=True, exist_ok=True)
    summary_path = plots_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    page = docs / "benchmark.md"
    text = page.read_text()
    plots = {
        "quality.png": "benchmark/quality.png",
        "scale_latency.png": "benchmark/scale_latency.png",
    }
    if quality:
        results = json.loads((bench_out / "results.json").read_text())
        report = _clean((bench_out / "report.md").read_text(), plots)
        quality_part, scale_part = _split_scale(report)
        text = replace_block(text, "quality", "\n".join(_demote(quality_part.splitlines())))
        shutil.copyfile(bench_out / "quality.png", plots_dir / "quality.png")
        summary["quality"] = quality_summary(results)
        summary["plot"] = _headline_plot(summary["quality"], plots_dir / "headline.png")
        if results.get("scale") and scale_part is not None:
            text = replace_block(text, "scale", scale_part)
            shutil.copyfile(bench_out / "scale_latency.png", plots_dir / "scale_latency.png")
            summary["scale"] = scale_summary(results["scale"])
    if scale:
        scale_md = _clean((bench_out / "scale.md").read_text(), plots)
        lines = [line for line in scale_md.splitlines() if line != "## Scale"]
        text = replace_block(text, "scale", "\n".join(_demote(lines)))
        shutil.copyfile(bench_out / "scale_latency.png", plots_dir / "scale_latency.png")
        summary["scale"] = scale_summary(json.loads((bench_out / "scale.json").read_text()))
    page.write_text(text)
    summary_path.write_text(json.dumps(summary, indent=1) + "\n")
    write_headline(docs, readme)


def write_headline(docs: Path, readme: Path) -> None:
    summary = json.loads((docs / "benchmark" / "summary.json").read_text())
    readme.write_text(replace_block(readme.read_text(), "benchmark", render_headline(summary)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=Path, default=ROOT / "docs")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("settings", help="docs/settings.md's table from knowmind.settings")
    bench = commands.add_parser("benchmark", help="publish a benchmark run into the docs")
    bench.add_argument("bench_out", type=Path)
    bench.add_argument("--quality", action="store_true", help="make bench's report")
    bench.add_argument("--scale", action="store_true", help="make bench-scale's report")
    commands.add_parser("headline", help="README's benchmark block from summary.json")
    args = parser.parse_args(argv)
    if args.command == "settings":
        write_settings(args.docs)
    elif args.command == "benchmark":
        if not (args.quality or args.scale):
            parser.error("benchmark: --quality, --scale or both")
        publish(args.bench_out, args.docs, args.readme, quality=args.quality, scale=args.scale)
    else:
        write_headline(args.docs, args.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
