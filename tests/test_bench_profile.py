"""The scale benchmark's recall profile (``--statements``): a real server with
``pg_stat_statements`` loaded and real recalls; without the library it says why it is missing."""

from __future__ import annotations

import asyncio
import time
import uuid

import numpy as np
import pytest
from sqlalchemy import text

from benchmark.cpu import CpuClock
from benchmark.scale import ROUNDS, _measure, _one_against_eight, _one_against_eight_replicas
from benchmark.scale_profile import PRELOAD_OPTIONS, profile_lines, recall_profile
from benchmark.scale_replicas import REPLICAS, ReplicaJob, Replicas
from benchmark.scale_report import _ratios, _replicas_line
from knowmind.db.embedded import EmbeddedPostgres
from knowmind.db.migrate import upgrade
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.memories import MemoryDraft
from knowmind.settings import available_cores

QUESTIONS = ["Wo steht der Server?", "Wer betreut das Backup?", "Wann läuft der Wartungsvertrag?"]
CONTENTS = [
    "Der Server der Firma steht in Kassel im Rechenzentrum Nord.",
    "Das Backup betreut Anna Schmidt vom Support-Team; es läuft jede Nacht.",
    "Der Wartungsvertrag für den Server wurde im Juni um ein Jahr verlängert.",
]


async def seeded_reader(runtime: Runtime, name: str) -> Principal:
    """A new German tenant holding ``CONTENTS``, and a reader of it."""
    tenant = await runtime.admin.admin.create_tenant(name, "german")
    writer = Principal(tenant.id, frozenset({"write"}))
    for content in CONTENTS:
        await runtime.ingest.memories.remember(writer, MemoryDraft(content=content))
    return Principal(tenant.id, frozenset({"read"}), language="german")


async def test_the_profile_counts_the_recalls_statements_and_not_its_own(
    tmp_path, embedder, settings
):
    server = EmbeddedPostgres(tmp_path / "pgdata", options=PRELOAD_OPTIONS)
    url = server.start()
    try:
        await asyncio.to_thread(upgrade, url, embedder.model_id, embedder.dim)
        own = settings.with_overrides(database_url=url, app_database_url=None)
        runtime = await Runtime.start(own, embedder, server)
        try:
            reader = await seeded_reader(runtime, "profiled")
            profile = await recall_profile(runtime, reader, QUESTIONS, _measure)
        finally:
            await runtime.close()
    finally:
        server.stop()

    assert "error" not in profile, profile
    assert profile["recalls"] == len(QUESTIONS)
    # every stage asks the database: the vector, BM25, graph and entity statements at least
    assert profile["statements_per_recall"] >= 5
    assert profile["postgres_ms_per_recall"] > profile["planning_ms_per_recall"] > 0
    assert profile["python_cpu_ms_per_recall"] > 0
    queries = [s["query"] for s in profile["top"]]
    assert any("embedding <=>" in q for q in queries), queries  # the vector stage's
    assert not any("pg_stat_statements" in q for q in queries), queries  # not the profile's own
    total = sum(s["exec_ms_per_recall"] + s["plan_ms_per_recall"] for s in profile["top"])
    # the top statements are part of the total (each figure rounded: 0.0005 per top figure,
    # 0.005 for the total)
    rounding = 2 * len(profile["top"]) * 0.0005 + 0.005
    assert total <= profile["postgres_ms_per_recall"] + rounding
    lines = profile_lines(profile, 3)
    assert len([line for line in lines if line.startswith("| `")]) == len(profile["top"])


async def test_the_cpu_clock_counts_the_database_backends_work(settings, embedder):
    """The clock reads the suite's own PostgreSQL server: a statement that keeps its backend
    busy shows in the database's CPU time, and in the clock's total."""
    runtime = await Runtime.start(settings, embedder)
    try:
        clock = await CpuClock.of_database(runtime)
        assert clock.postmaster is not None
        before, total_before = clock.database_seconds(), clock.seconds()
        async with runtime.database.db.owner_tx() as conn:
            started = time.perf_counter()
            await conn.execute(text("SELECT count(*) FROM generate_series(1, 3000000)"))
            busy_s = time.perf_counter() - started
        spent, total = clock.database_seconds() - before, clock.seconds()
    finally:
        await runtime.close()
    # the backend ran for most of the statement's wall time (two cores, little else running)
    assert spent >= 0.5 * busy_s, (spent, busy_s)
    assert total is not None and total_before is not None and total - total_before >= spent
    assert CpuClock(None).seconds() is None  # a server on another host: not measured


async def test_without_the_library_the_profile_says_why(settings, embedder):
    runtime = await Runtime.start(settings, embedder)  # the suite's server: no preload
    try:
        who = Principal(uuid.uuid4(), frozenset({"read"}))
        profile = await recall_profile(runtime, who, QUESTIONS, _measure)
        nothing_asked = await recall_profile(runtime, who, [], _measure)
    finally:
        await runtime.close()
    assert profile["error"].startswith("pg_stat_statements is not available"), profile
    assert profile_lines(profile, 100) == [f"- Recall profile: not measured ({profile['error']})"]
    assert nothing_asked == {"error": "no questions to ask"}


def test_a_statement_with_a_pipe_keeps_the_table_intact():
    """Unit test (no server): the report's table escapes what markdown would split on."""
    profile = {
        "recalls": 2,
        "p50_ms": 3.0,
        "python_cpu_ms_per_recall": 1.5,
        "postgres_ms_per_recall": 2.0,
        "planning_ms_per_recall": 0.5,
        "statements_per_recall": 4.0,
        "top": [
            {
                "query": "SELECT a || b FROM t",
                "calls_per_recall": 1.0,
                "exec_ms_per_recall": 1.5,
                "plan_ms_per_recall": 0.5,
            }
        ],
    }
    row = next(line for line in profile_lines(profile, 1000) if line.startswith("| `"))
    assert row == "| `SELECT a \\|\\| b FROM t…` | 1.0 | 1.5 | 0.5 |"


async def test_one_and_eight_clients_alternate_in_pairs(settings, embedder):
    """The scale benchmark's 8-client ratios: real recalls on the suite's server, each pair's
    ratios from its own two runs, the medians over the pairs, every request pooled."""
    runtime = await Runtime.start(settings, embedder)
    try:
        reader = await seeded_reader(runtime, "paired")
        clock = await CpuClock.of_database(runtime)
        one, eight = await _one_against_eight(runtime, reader, QUESTIONS, pairs=3, clock=clock)
    finally:
        await runtime.close()
    asked = 3 * ROUNDS * len(QUESTIONS)
    assert one["requests"] == eight["requests"] == asked
    assert "pairs" not in one
    assert len(eight["pairs"]) == 3
    keys = ("throughput_x", "p95_x", "throughput_x_ceiling", "latency_x_at_ceiling")
    for key in keys:
        ratios = sorted(p[key] for p in eight["pairs"])
        assert all(r > 0 for r in ratios)
        assert eight[f"{key}_median"] == ratios[1]
    # the server's CPU: no side keeps more cores busy than there are, so no pair beats its
    # ceiling (a process's run time is read up to a scheduler tick late: 5 % on runs this short;
    # counting a process twice would be 50 % and more)
    cores = available_cores()
    for side in (one, eight):
        assert side["cpu_ms_per_req"] > 0 and 0 < side["cores_busy"] <= cores * 1.05
    assert all(p["throughput_x"] <= p["throughput_x_ceiling"] * 1.05 for p in eight["pairs"])
    line = _ratios(one, eight, cores)
    assert f"throughput × {eight['throughput_x_median']:.2f}" in line
    assert "medians of 3 alternated pairs" in line
    assert f"at most × {eight['throughput_x_ceiling_median']:.2f}" in line
    # a result from before the pairs: the ratio of its two runs
    older = {"req_per_s": 30.0, "p95_ms": 200.0}
    assert _ratios({"req_per_s": 20.0, "p95_ms": 40.0}, older) == "throughput × 1.50, p95 × 5.00"


async def test_two_replicas_serve_the_eight_clients(settings, embedder):
    """The replicas' pairs: spawned server processes on the suite's database answer real
    recalls of one tenant, every replica its share of the 8 clients; each pair's ratios come
    from its own two runs, and the report says what was measured."""
    runtime = await Runtime.start(settings, embedder)
    try:
        reader = await seeded_reader(runtime, "replicas")
    finally:
        await runtime.close()
    assert reader.tenant_id is not None
    vectors = np.asarray(embedder.embed_queries(QUESTIONS), dtype=np.float32)
    job = ReplicaJob(settings, reader.tenant_id, "german", QUESTIONS, vectors, clients=4)
    result = await _one_against_eight_replicas(job, pairs=2)
    asked = 2 * ROUNDS * len(QUESTIONS)
    assert result["1"]["requests"] == asked  # one replica serves the single client
    assert result["8"]["requests"] == REPLICAS * asked  # and every replica its clients
    assert [sorted(p) for p in result["8"]["pairs"]] == [["p95_x", "throughput_x"]] * 2
    assert all(p["throughput_x"] > 0 for p in result["8"]["pairs"])
    (line,) = _replicas_line(result | {"tenant_chunks": len(CONTENTS)})
    assert f"{result['8']['req_per_s']} req/s against {result['1']['req_per_s']}" in line
    assert "medians of 2 alternated pairs" in line


async def test_a_replica_that_cannot_start_stops_the_run(settings, embedder):
    """A replica whose server cannot start (no database there) ends the measurement with an
    error naming its exit, and no replica is left running."""
    unreachable = settings.with_overrides(
        database_url="postgresql+asyncpg://knowmind@/none?host=/nonexistent"
    )
    vectors = np.asarray(embedder.embed_queries(QUESTIONS), dtype=np.float32)
    job = ReplicaJob(unreachable, uuid.uuid4(), "german", QUESTIONS, vectors, clients=1)
    replicas = Replicas(job)
    with pytest.raises(RuntimeError, match="exited with code"):
        async with replicas:
            pass
    assert not any(process.is_alive() for process in replicas._processes)
