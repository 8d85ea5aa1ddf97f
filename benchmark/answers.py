"""Answer methods against standard retrieval, with the embedded language model: recall@5 and
nDCG@10 of the passages each method retrieves (``hyde``, ``multi_query``, ``corrective`` call
the model to retrieve; generation is not judged — SmolLM2-135M's answers say nothing about
answer quality), on the quick subsets of datasets, in one run; five passages per answer (the
endpoint's default).

    make bench-answer BENCH_OUT=DIR        # DIR/answers.json and DIR/answers.md
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

from benchmark.__main__ import ROOT, default_cache, start_runtime
from benchmark.datasets import load
from benchmark.metrics import aggregate, per_query
from benchmark.runner import ingested_tenant, percentiles
from knowmind.answer.base import AnswerContext
from knowmind.answer.methods import ANSWER_METHODS
from knowmind.services.answer import AnswerRequest

METHODS = ("standard", "hyde", "multi_query", "corrective")
K = 5  # passages per answer, the endpoint's default


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"datasets": {}}
    async with start_runtime(args) as runtime:
        llm = runtime.models.llm
        if llm is None:
            raise SystemExit("no language model here: make install fetches the embedded one")
        results["model"] = f"{llm.provider}:{llm.model}"
        for name in args.datasets.split(","):
            dataset = load(name, args.data_dir, quick_mode=True)
            dataset.queries = dataset.queries[: args.queries]
            (who, *_), _ = await ingested_tenant(runtime, dataset)
            rows: dict[str, Any] = {}
            for method in METHODS:
                scores, times, calls = [], [], 0
                for query in tqdm(dataset.queries, desc=f"{name}/{method}", leave=False):
                    request = AnswerRequest(question=query.text, rerank=False)
                    ctx = AnswerContext(llm, runtime.answers.service.retriever(who, request))
                    started = time.perf_counter()
                    outcome = await ANSWER_METHODS[method](ctx, query.text, K)
                    times.append((time.perf_counter() - started) * 1000)
                    calls += ctx.prompt_tokens > 0
                    ranking = [p.source or "" for p in outcome.passages]
                    scores.append(per_query(ranking, dataset.qrels[query.id]))
                rows[method] = {
                    "metrics": aggregate(scores),
                    "latency_ms": percentiles(times),
                    "queries_that_called_the_model": calls,
                }
            results["datasets"][name] = {"queries": len(dataset.queries), "methods": rows}
    return results


def report(results: dict[str, Any]) -> str:
    lines = [
        "## Answer methods: retrieval against standard",
        "",
        f"Model {results['model']}; quick subsets; passages ranked as each method retrieves "
        "them (no generation).",
        "",
        "| dataset | method | recall@5 | mrr (5 passages) | p50 ms | queries calling the model |",
        "|---|---|---|---|---|---|",
    ]
    for name, data in results["datasets"].items():
        for method, row in data["methods"].items():
            m = row["metrics"]
            lines.append(
                f"| {name} ({data['queries']} q) | {method} | {m.get('recall@5', 0):.3f} | "
                f"{m.get('mrr@10', 0):.3f} | {row['latency_ms'].get('p50', 0):.0f} | "
                f"{row['queries_that_called_the_model']} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmark.answers", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out")
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "datasets")
    parser.add_argument("--cache", type=Path, default=default_cache())
    parser.add_argument("--datasets", default="xquad-de,musique")
    parser.add_argument("--queries", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="knowmind-answers-") as tmp:
        args.tmp = Path(tmp)
        results = asyncio.run(run(args))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "answers.json").write_text(json.dumps(results, indent=1))
    (args.out / "answers.md").write_text(report(results))
    print(report(results))


if __name__ == "__main__":
    main()
