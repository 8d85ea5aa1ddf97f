"""Two API processes and two workers on one PostgreSQL (the embedded one), as a scaled-out
deployment runs them: they migrate a fresh database together, take mixed load through both
APIs, and end with no lost or doubled writes, every job done exactly once, the Neo4j mirror
(FalkorDB here) equal to PostgreSQL, and the same recall answers from either replica.
Needs the Bolt test server (private network namespace). No apostrophes in the texts: FalkorDB's
Bolt bridge fails on a string parameter holding one (real Neo4j does not)."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import make_url, text

from knowmind.db.engine import make_engine
from knowmind.graph.neo4j_mirror import Neo4jMirror
from tests.graph_server import falkordb  # noqa: F401  (fixture)
from tests.test_server_process import free_port, knowmind, stop, wait_ready

pytestmark = pytest.mark.slow

ADMIN = "kmadmin_replicas-test-admin-token"
SENTENCES = (
    "Die Muster GmbH eröffnet ein Lager in Kassel.",
    "Anna Meier leitet die IT-Abteilung.",
    "The backup job runs every night at 2 am.",
    "Das Wartungsfenster ist sonntags von 6 bis 8 Uhr.",
    "Jonas Weber moved from Berlin to Hamburg in spring.",
    "The VPN gateway was replaced by a WireGuard cluster.",
    "Die Kantine bietet dienstags vegetarische Lasagne an.",
    "Our on-call rotation changes every Monday at nine.",
)
QUERIES = (
    "Wer leitet die IT?",
    "When does the backup run?",
    "Wo eröffnet die Muster GmbH ein Lager?",
    "What replaced the VPN gateway?",
    "Wann ist das Wartungsfenster?",
)


async def _sql(url: str, statement: str, params: dict[str, Any] | None = None) -> list[Any]:
    engine = make_engine(url, 1)
    try:
        async with engine.connect() as conn:
            if statement.startswith("CREATE DATABASE"):
                conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            result = await conn.execute(text(statement), params or {})
            return list(result.all()) if result.returns_rows else []
    finally:
        await engine.dispose()


def sql(url: str, statement: str, **params: Any) -> list[Any]:
    return asyncio.run(_sql(url, statement, params))


@pytest.fixture(scope="module")
def fresh_database(pg_server) -> str:
    """An empty database on the session's server: the replicas migrate it themselves."""
    name = f"replicas_{uuid.uuid4().hex[:8]}"
    sql(pg_server.url, f"CREATE DATABASE {name}")
    return make_url(pg_server.url).set(database=name).render_as_string(hide_password=False)


class Deployment:
    def __init__(self, apis: list[str], logs: list[Path]) -> None:
        self.apis, self.logs = apis, logs

    def worker_log_events(self, event: str) -> list[dict[str, Any]]:
        found = []
        for log in self.logs:
            for line in (log / "stderr").read_text().splitlines() + (
                (log / "stdout").read_text().splitlines()
            ):
                if line.startswith("{") and f'"{event}"' in line:
                    found.append(json.loads(line))
        return found


@pytest.fixture(scope="module")
def deployment(fresh_database, falkordb, tmp_path_factory) -> Iterator[Deployment]:  # noqa: F811
    root = tmp_path_factory.mktemp("replicas")
    common = {
        "KNOWMIND_DATABASE_URL": fresh_database,
        "KNOWMIND_ADMIN_TOKEN": ADMIN,
        "KNOWMIND_NEO4J_URL": falkordb.bolt_url,
        "KNOWMIND_RERANKER": "none",
    }
    apis, processes, worker_logs = [], [], []
    try:
        for i in range(2):  # both at once: they migrate the empty database concurrently
            port = free_port()
            env = common | {"KNOWMIND_RUN_WORKERS": "off"}
            processes.append(knowmind(root / f"api{i}", "serve", port=port, env_extra=env))
            apis.append(f"http://127.0.0.1:{port}")
        for i in range(2):
            log = root / f"worker{i}-log"
            env = common | {"KNOWMIND_JOB_POLL_SECONDS": "0.2"}
            processes.append(knowmind(root / f"worker{i}", "worker", env_extra=env, log_to=log))
            worker_logs.append(log)
        for base, process in zip(apis, processes, strict=False):
            wait_ready(base, process, timeout_s=180)
        yield Deployment(apis, worker_logs)
    finally:
        for process in processes:
            if process.poll() is None:
                stop(process)


def _post(base: str, path: str, body: dict[str, Any], token: str) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.post(f"{base}{path}", json=body, headers=headers, timeout=120)


def _tenant(deployment: Deployment) -> tuple[str, str]:
    a, b = deployment.apis
    created = _post(a, "/v1/admin/tenants", {"name": f"r-{uuid.uuid4().hex[:8]}"}, ADMIN)
    assert created.status_code == 201, created.text
    tenant = created.json()["id"]
    issued = _post(b, f"/v1/admin/tenants/{tenant}/tokens", {"scopes": ["read", "write"]}, ADMIN)
    assert issued.status_code == 201, issued.text
    return tenant, issued.json()["token"]


def _mixed_load(deployment: Deployment, token: str) -> tuple[list[str], list[httpx.Response]]:
    """40 memories (some with relations), a batch, the same memory sent to both replicas at
    once, and recalls in between; returns the ids the APIs reported as written."""
    a, b = deployment.apis

    def memory(i: int) -> httpx.Response:
        body: dict[str, Any] = {"content": f"{SENTENCES[i % len(SENTENCES)]} (Notiz {i})"}
        if i % 4 == 0:
            body["relations"] = [
                {
                    "predicate": "WORKS_FOR",
                    "object": f"Firma {i % 3}",
                    "object_class": "Organization",
                }
            ]
        return _post((a, b)[i % 2], "/v1/memories", body, token)

    def recall(i: int) -> httpx.Response:
        return _post((a, b)[i % 2], "/v1/recall", {"query": QUERIES[i % len(QUERIES)]}, token)

    twin = {"content": "Das Passwort-Tresor-Audit findet jeden ersten Freitag statt."}
    batch = {"items": [{"content": f"Batch-Eintrag {i}: {SENTENCES[i]}"} for i in range(6)]}
    with ThreadPoolExecutor(8) as pool:
        writes = [pool.submit(memory, i) for i in range(40)]
        twins = [pool.submit(_post, base, "/v1/memories", twin, token) for base in (a, b)]
        batched = pool.submit(_post, b, "/v1/memories/batch", batch, token)
        recalls = [pool.submit(recall, i) for i in range(10)]
        written = [f.result() for f in writes]
        twin_answers = [f.result() for f in twins]
        batch_answer = batched.result()
        recall_answers = [f.result() for f in recalls]
    assert all(r.status_code == 201 for r in written), [r.text for r in written]
    assert all(r.status_code in (200, 201) for r in twin_answers), [r.text for r in twin_answers]
    assert len({r.json()["id"] for r in twin_answers}) == 1, "the same memory written twice"
    assert batch_answer.status_code in (200, 201), batch_answer.text
    assert batch_answer.json()["failed"] == 0
    assert all(r.status_code == 200 for r in recall_answers), [r.text for r in recall_answers]
    ids = [r.json()["id"] for r in written] + [twin_answers[0].json()["id"]]
    ids += [item["id"] for item in batch_answer.json()["results"]]
    return ids, recall_answers


def _wait(condition, what: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def _ranking(response: httpx.Response) -> list[tuple[Any, ...]]:
    assert response.status_code == 200, response.text
    return [
        (hit["chunk_id"], round(hit["score"], 6), tuple(sorted(hit["stages"].items())))
        for hit in response.json()["results"]
    ]


def test_two_apis_and_two_workers_share_one_database(deployment, fresh_database, falkordb):  # noqa: F811
    tenant, token = _tenant(deployment)
    ids, _ = _mixed_load(deployment, token)

    assert len(ids) == len(set(ids)), "an id was reported for two writes"
    stored = sql(fresh_database, "SELECT id FROM memories WHERE tenant_id = :t", t=tenant)
    assert sorted(str(row.id) for row in stored) == sorted(ids)  # none lost, none doubled

    def jobs_settled() -> bool:
        rows = sql(
            fresh_database,
            "SELECT count(*) FROM jobs WHERE tenant_id = :t AND status IN ('pending', 'running')",
            t=tenant,
        )
        return rows[0][0] == 0

    _wait(jobs_settled, "the workers to finish the jobs")
    jobs = sql(
        fresh_database, "SELECT id, status, attempts FROM jobs WHERE tenant_id = :t", t=tenant
    )
    assert jobs, "the writes enqueued no jobs"
    assert {(row.status, row.attempts) for row in jobs} == {("done", 1)}
    done = Counter(
        event["job_id"]
        for event in deployment.worker_log_events("jobs.done")
        if event.get("tenant_id") == tenant
    )
    assert set(done) == {str(row.id) for row in jobs}
    assert max(done.values()) == 1, "a job ran twice"

    def outbox_drained() -> bool:
        rows = sql(
            fresh_database, "SELECT count(*) FROM graph_outbox WHERE tenant_id = :t", t=tenant
        )
        return rows[0][0] == 0

    _wait(outbox_drained, "the mirror to drain the outbox")
    expected = sql(
        fresh_database,
        "SELECT (SELECT count(*) FROM entities WHERE tenant_id = :t)"
        " + (SELECT count(*) FROM memories WHERE tenant_id = :t),"
        " (SELECT count(*) FROM edges WHERE tenant_id = :t)"
        " + (SELECT count(*) FROM mentions WHERE tenant_id = :t)",
        t=tenant,
    )[0]

    async def mirrored() -> tuple[int, int]:
        mirror = await Neo4jMirror.connect(falkordb.bolt_url)
        try:
            return await mirror.counts(uuid.UUID(tenant))
        finally:
            await mirror.close()

    assert expected[1] > 0, "the load made no graph edges"
    assert asyncio.run(mirrored()) == tuple(expected)

    a, b = deployment.apis
    for query in QUERIES:
        answers = [_post(base, "/v1/recall", {"query": query, "k": 8}, token) for base in (a, b)]
        first, second = (_ranking(r) for r in answers)
        assert first, f"no results for {query!r}"
        assert first == second, query
