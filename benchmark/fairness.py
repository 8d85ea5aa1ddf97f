"""Head-of-line: does one tenant's write load stall another tenant?

Tenant B (50 short memories) writes one sentence at a time and recalls, first on an idle server,
then while tenant A stores a 200 KB memory and 20 concurrent 50 KB memories (the load of issue
12). Reported: B's write latency and recall p50/p95 idle and under load, B's stage timeouts, and
what A got (stored, refused with 429/503). Runs in-process on the services (no HTTP) with the
real model and an embedded PostgreSQL; the job worker runs (extraction is part of the load).

``python -m benchmark.fairness --out DIR`` (``make bench-fairness``) writes DIR/fairness.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from uuid import UUID

from benchmark.runner import percentiles
from knowmind.errors import OverloadedError
from knowmind.recall.base import RecallRequest
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.memories import MemoryDraft
from knowmind.settings import Settings

__all__ = ["run_fairness"]

ROOT = Path(__file__).resolve().parent.parent
_FACTS = [
    "Die Kantine im Gebäude {n} öffnet werktags um halb zwölf.",
    "Frau Berger aus Team {n} betreut die Lieferanten in Kassel.",
    "Das Backup von Server {n} läuft jede Nacht um zwei Uhr.",
    "Projekt {n} wurde im Juni an die Firma Nordlicht übergeben.",
    "Der Parkplatz {n} ist für Besucher reserviert.",
]
_QUESTIONS = [
    "Wann öffnet die Kantine?",
    "Wer betreut die Lieferanten?",
    "Wann läuft das Backup?",
    "An wen wurde das Projekt übergeben?",
    "Welcher Parkplatz ist für Besucher?",
]
_PARAGRAPH = (
    "Der Wartungsbericht beschreibt den Austausch der Lüfter, die Prüfung der Netzteile und "
    "die neuen Kabelwege im Rechenzentrum; offene Punkte gehen an das Betriebsteam. "
)


def _memory_of(kilobytes: int, label: str) -> MemoryDraft:
    paragraphs = kilobytes * 1024 // len(_PARAGRAPH.encode()) + 1
    content = "\n\n".join(f"{label}, Abschnitt {i}. {_PARAGRAPH}" for i in range(paragraphs))
    return MemoryDraft(content=content, title=label)


async def _b_writes(runtime: Runtime, b: Principal, n: int, tag: str) -> list[float]:
    times = []
    for i in range(n):
        started = time.perf_counter()
        await runtime.memories.remember(
            b, MemoryDraft(content=f"Notiz {tag}-{i}: Raum {i} ist ab Montag frei.")
        )
        times.append((time.perf_counter() - started) * 1000)
    return times


async def _b_recalls(runtime: Runtime, b: Principal, rounds: int) -> dict[str, Any]:
    times, timeouts, degraded = [], 0, 0
    stages: dict[str, list[float]] = {}
    for _ in range(rounds):
        for question in _QUESTIONS * 4:
            started = time.perf_counter()
            outcome = await runtime.recall.recall(b, RecallRequest(text=question, k=10, hops=2))
            times.append((time.perf_counter() - started) * 1000)
            for stage, ms in outcome.timings_ms.items():
                stages.setdefault(stage, []).append(ms)
            reasons = outcome.degraded_reasons
            degraded += bool(reasons)
            timeouts += sum("timed out" in r for r in reasons)
    summary = {"recalls": len(times), "stage_timeouts": timeouts, "degraded": degraded}
    stage_p50 = {stage: percentiles(ms)["p50"] for stage, ms in sorted(stages.items())}
    return summary | percentiles(times) | {"stages_p50_ms": stage_p50}


async def _a_load(runtime: Runtime, a: Principal) -> dict[str, int]:
    outcomes = {"stored": 0, "refused_429": 0, "refused_503": 0, "failed": 0}

    async def one(draft: MemoryDraft) -> None:
        try:
            await runtime.memories.remember(a, draft)
            outcomes["stored"] += 1
        except OverloadedError as exc:
            outcomes[f"refused_{exc.status_code}"] += 1
        except Exception:
            outcomes["failed"] += 1

    drafts = [_memory_of(200, "Großer Bericht")]
    drafts += [_memory_of(50, f"Bericht {i}") for i in range(20)]
    await asyncio.gather(*(one(d) for d in drafts))
    return outcomes


async def run_fairness(settings: Settings, model: Any, query_model: Any = None) -> dict[str, Any]:
    runtime = await Runtime.start(
        settings.with_overrides(reranker="none"), model, None, query_model
    )
    runtime.start_workers()
    try:
        tenants = []
        for name in ("fair-a", "fair-b"):
            row = await runtime.admin.create_tenant(f"{name}-{time.time_ns()}", "german")
            tenants.append(Principal(UUID(str(row.id)), frozenset({"write"}), language="german"))
        a, b = tenants
        for n in range(10):
            for fact in _FACTS:
                await runtime.memories.remember(b, MemoryDraft(content=fact.format(n=n)))
        await _b_recalls(runtime, b, 1)  # warm
        idle = {
            "write_ms": percentiles(await _b_writes(runtime, b, 5, "idle")),
            "recall": await _b_recalls(runtime, b, 2),
        }
        load = asyncio.ensure_future(_a_load(runtime, a))
        await asyncio.sleep(1.0)  # A's uploads are queued and being embedded
        loaded = {
            "write_ms": percentiles(await _b_writes(runtime, b, 5, "load")),
            "recall": await _b_recalls(runtime, b, 2),
            "a_still_loading": not load.done(),
        }
        a_outcomes = await load
        return {
            "idle": idle,
            "under_load": loaded,
            "tenant_a": a_outcomes,
            "recall_p50_ratio": round(loaded["recall"]["p50"] / idle["recall"]["p50"], 2),
            "load": "tenant A: one 200 KB memory and 20 concurrent 50 KB memories",
            "embed_queue_per_tenant": settings.models.embed_queue_per_tenant,
            "query_model": "separate" if query_model is not None else "shared",
        }
    finally:
        await runtime.close()


def main(argv: list[str] | None = None) -> int:
    from knowmind.db.embedded import EmbeddedPostgres
    from knowmind.db.migrate import upgrade
    from knowmind.logging import configure_logging
    from knowmind.models.factory import build_embedder, build_query_embedder

    parser = argparse.ArgumentParser(prog="python -m benchmark.fairness", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "bench-out")
    args = parser.parse_args(argv)
    configure_logging("json", "warning")
    args.out.mkdir(parents=True, exist_ok=True)
    base = Settings.from_env()
    models = base.models
    model = build_embedder(models.embedder, models.embedder_threads)
    query_model = build_query_embedder(
        models.embedder, models.embedder_threads, models.separate_query_model
    )
    with tempfile.TemporaryDirectory(prefix="knowmind-fair-") as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pgdata")
        url = server.start()
        try:
            upgrade(url, model.model_id, model.dim)
            settings = base.with_overrides(database_url=url, data_dir=Path(tmp))
            results = asyncio.run(run_fairness(settings, model, query_model))
        finally:
            server.stop()
    (args.out / "fairness.json").write_text(json.dumps(results, indent=1))
    print(json.dumps(results, indent=1), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
