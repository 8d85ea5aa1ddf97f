"""The scale section (markdown) and the latency-versus-tenant-size plot per stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark.scale_profile import profile_lines

__all__ = ["scale_lines", "write_scale_report"]

STAGES = ("embed", "bm25", "vector", "graph", "identity", "total")
# the table also shows the wait for the recall admission gate (none with one client)
TABLE_STAGES = (*STAGES[:-1], "queue", "total")


def _runs_table(runs: list[dict[str, Any]]) -> list[str]:
    """One row per run; the server's CPU per request where it was measured (older results and
    a database on another host have none)."""
    lines = [
        "| tenant chunks | clients | query embedding | req/s | p50 ms | p95 ms | "
        + " | ".join(f"{s} p50" for s in TABLE_STAGES)
        + " | CPU ms per request | cores busy |",
        "|---" * (8 + len(TABLE_STAGES)) + "|",
    ]
    for run in runs:
        stages = run["stages_p50_ms"]
        lines.append(
            f"| {run['tenant_chunks']:,} | {run['concurrency']} | {run['embedding']} | "
            f"{run['req_per_s']} | {run['p50_ms']} | {run['p95_ms']} | "
            + " | ".join(str(stages.get(s, "–")) for s in TABLE_STAGES)
            + f" | {run.get('cpu_ms_per_req', '–')} | {run.get('cores_busy', '–')} |"
        )
    return lines


def _concurrency_lines(runs: list[dict[str, Any]], cores: int | None) -> list[str]:
    """8 clients against 1, for every tenant size measured both ways."""
    lines = []
    for size in sorted({r["tenant_chunks"] for r in runs}):
        for mode in ("cached", "live"):
            by_c = {
                r["concurrency"]: r
                for r in runs
                if r["embedding"] == mode and r["tenant_chunks"] == size
            }
            if 1 in by_c and 8 in by_c:
                lines.append(
                    f"- {size:,}-chunk tenant, {mode} query embedding, 8 clients vs 1: "
                    + _ratios(by_c[1], by_c[8], cores)
                )
    return lines


def _ratios(one: dict[str, Any], eight: dict[str, Any], cores: int | None = None) -> str:
    """Throughput and p95 of 8 clients against 1: the medians of the alternated pairs, or
    (older results) of the two runs; and, where CPU was measured, the core-bound ceiling."""
    pairs = eight.get("pairs")
    if not pairs:
        return (
            f"throughput × {eight['req_per_s'] / one['req_per_s']:.2f}, "
            f"p95 × {eight['p95_ms'] / one['p95_ms']:.2f}"
        )
    each = "; ".join(f"× {p['throughput_x']:.2f} / × {p['p95_x']:.2f}" for p in pairs)
    line = (
        f"throughput × {eight['throughput_x_median']:.2f}, p95 × {eight['p95_x_median']:.2f} "
        f"(medians of {len(pairs)} alternated pairs: {each})"
    )
    if "throughput_x_ceiling_median" not in eight:
        return line
    return line + (
        f". Server CPU per request (this process and PostgreSQL): {one['cpu_ms_per_req']} ms "
        f"with 1 client ({one['cores_busy']} cores busy), {eight['cpu_ms_per_req']} ms with 8 "
        f"({eight['cores_busy']} busy). With every one of {cores or 'the'} cores busy at that, "
        f"8 clients get at most × {eight['throughput_x_ceiling_median']:.2f} of 1 client's "
        "throughput, and their mean latency there is "
        f"× {eight['latency_x_at_ceiling_median']:.2f} of 1 client's p95 (medians over the pairs)"
    )


def _by_ef(recall: dict[str, Any]) -> str:
    return "; ".join(
        f"{limit.replace('_', ' ')}: "
        + ", ".join(f"ef {ef} {v['recall_at_10']} in {v['p50_ms']} ms" for ef, v in by_ef.items())
        for limit, by_ef in recall.items()
        if limit.startswith("limit_")
    )


def _global_index_line(recall: dict[str, Any], corpus: dict[str, Any]) -> list[str]:
    """The global index beside the tenant's own one (older results have neither)."""
    lines = []
    if "tenant_index_build_s" in corpus:
        lines.append(
            f"- Tenant HNSW indexes (tenants ≥ {corpus['tenant_index_min_rows']:,} chunks): "
            f"{len(corpus['tenant_indexes'])} built in {corpus['tenant_index_build_s']} s"
        )
    global_index = recall.get("global_index")
    if global_index and recall.get("path") != "hnsw":
        lines.append(
            f"- The same through the global index: {global_index['recall_at_10']} as the stage "
            "would ask; " + _by_ef(global_index)
        )
    return lines


def _cold_pass_line(cold: dict[str, dict[str, float]] | None) -> list[str]:
    """The unmeasured first pass per tenant (older results have none)."""
    if not cold:
        return []
    passes = "; ".join(
        f"{int(size):,} chunks {v['p50_ms']} / {v['p95_ms']} ms" for size, v in cold.items()
    )
    return [
        "- First pass over the questions, before the measured ones (1 client, cached query "
        f"embedding, pages read from disk; p50 / p95): {passes}"
    ]


def _replicas_line(replicas: dict[str, Any] | None) -> list[str]:
    """8 clients against 1 with two API replicas on this host (older results have none)."""
    if not replicas:
        return []
    one, eight = replicas["1"], replicas["8"]
    return [
        f"- {replicas['tenant_chunks']:,}-chunk tenant, cached query embedding, served by "
        f"{replicas['replicas']} API replicas on this host ({replicas['clients_per_replica']} "
        f"of the 8 clients each; 1 client on one of them): {eight['req_per_s']} req/s against "
        f"{one['req_per_s']}, p95 {eight['p95_ms']} against {one['p95_ms']} ms; "
        + _ratios(one, eight)
    ]


def scale_lines(scale: dict[str, Any]) -> list[str]:
    corpus, storage, ingest = scale["corpus"], scale["storage_per_1k_chunks_mb"], scale["ingest"]
    recall = scale["hnsw_recall_at_10"]
    return [
        "## Scale",
        "",
        f"Layout `{scale['layout']}`: {corpus['chunks']:,} chunks in {corpus['tenants']:,} "
        f"tenants, text recombined from {corpus['sentences']:,} real sentences (German and "
        f"English); vectors: {corpus['vectors']}. Load: {corpus['load_s']}. "
        f"Tenants up to {scale['vector_exact_max_rows']:,} chunks get exact vector search.",
        "",
        *_runs_table(scale["runs"]),
        "",
        *_concurrency_lines(scale["runs"], scale.get("cores")),
        *_replicas_line(scale.get("replicas")),
        *_cold_pass_line(scale.get("cold_pass_1_client")),
        f"- HNSW recall@10 against exact search ({recall['tenant_chunks']:,}-chunk tenant, "
        f"{recall['queries']} real questions): {recall['recall_at_10']} as the vector stage "
        f"asks (path `{recall.get('path', 'hnsw')}`, {recall['candidates']} candidates, "
        f"ef_search {recall.get('ef_search', 100)}); " + _by_ef(recall),
        *_global_index_line(recall, corpus),
        *profile_lines(scale.get("recall_profile"), recall["tenant_chunks"]),
        "- Storage, MB per 1k rows (embedding + HNSW index): "
        + ", ".join(f"{k} {v}" for k, v in storage.items() if "(" in k)
        + f"; halfvec saves {storage['halfvec_saving_at_1024']:.0%} at 1024-d; a whole chunk "
        "as deployed here (text, tsvector, vector, sentence vectors, indexes): "
        f"{storage['chunks_table_as_deployed']}",
        f"- Ingest ({ingest['path']}): {ingest['ingest_memories_per_s']} memories/s vs the bare "
        f"embedder's {ingest['embedder_passages_per_s']} passages/s "
        f"(ratio {ingest['ingest_to_embedder_ratio']}"
        + (
            f", median of {ingest['rounds']} back-to-back pairs {ingest['pairs']}"
            if "pairs" in ingest
            else ""
        )
        + ")",
        "",
    ]


def _plot(scale: dict[str, Any], out: Path) -> str:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "(plot skipped: matplotlib is not installed — it comes with the `bench` extra)"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, mode in zip(axes, ("cached", "live"), strict=True):
        runs = sorted(
            (r for r in scale["runs"] if r["concurrency"] == 1 and r["embedding"] == mode),
            key=lambda r: r["tenant_chunks"],
        )
        sizes = [r["tenant_chunks"] for r in runs]
        for stage in STAGES:
            values = [r["stages_p50_ms"].get(stage) for r in runs]
            if any(v is not None for v in values):
                ax.plot(sizes, [v or 0 for v in values], marker="o", label=stage)
        ax.set_xscale("log")
        ax.set_xlabel("chunks in the tenant")
        ax.set_title(f"p50 per stage, 1 client, query embedding {mode}")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("ms")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "scale_latency.png", dpi=110)
    plt.close(fig)
    return "![latency per stage versus tenant size](scale_latency.png)"


def write_scale_report(scale: dict[str, Any], out: Path) -> list[str]:
    """Writes scale.md and scale_latency.png into ``out``; returns the markdown lines."""
    lines = [*scale_lines(scale), _plot(scale, out), ""]
    (out / "scale.md").write_text("\n".join(lines))
    return lines
