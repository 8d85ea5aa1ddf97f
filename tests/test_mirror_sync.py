"""The Neo4j mirror end to end: writes go to PostgreSQL and the outbox, the drainer brings the
Bolt server (FalkorDB here) to the same nodes and edges, an outage only delays it, and
``graph resync`` rebuilds a tenant. Needs the Bolt test server (private network namespace)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from knowmind.app import create_app
from knowmind.graph.neo4j_mirror import Neo4jMirror
from knowmind.workers.mirror import resync_tenant
from tests.conftest import count_rows, make_tenant
from tests.graph_server import falkordb  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
async def mirrored(settings, embedder, falkordb):  # noqa: F811
    mirrored_settings = settings.with_overrides(
        neo4j_url=falkordb.bolt_url, graph_retry_max_seconds=0.5
    )
    async with AsyncTestClient(app=create_app(mirrored_settings, embedder=embedder)) as client:
        yield client


@pytest.fixture(scope="module")
async def inspector(falkordb):  # noqa: F811
    mirror = await Neo4jMirror.connect(falkordb.bolt_url)
    yield mirror
    await mirror.close()


async def store_counts(db, tenant_id: str) -> tuple[int, int]:
    nodes = await count_rows(db, "entities", tenant_id) + await count_rows(
        db, "memories", tenant_id
    )
    edges = await count_rows(db, "edges", tenant_id) + await count_rows(db, "mentions", tenant_id)
    return nodes, edges


async def wait_for_mirror(client, timeout_s: float = 20.0) -> dict:
    report: dict = {}
    for _ in range(int(timeout_s / 0.1)):
        report = (await client.get("/ready")).json()["graph_mirror"]
        if report["pending_changes"] == 0 and report["status"] == "ok":
            return report
        await asyncio.sleep(0.1)
    raise AssertionError(f"mirror did not catch up: {report}")


async def test_acceptance_mirror_holds_the_same_graph(mirrored, inspector, db):
    tenant = await make_tenant(mirrored)
    first = await mirrored.post(
        "/v1/memories?wait=true",
        json={
            "content": "Anna Meier leitet die IT der Muster GmbH.",
            "relations": [
                {"predicate": "LEADS", "object": "Muster GmbH", "object_class": "Organization"}
            ],
        },
        headers=tenant.write,
    )
    await mirrored.post(
        "/v1/memories?wait=true",
        json={"content": "Die Muster GmbH bezieht ein neues Lager in Kassel."},
        headers=tenant.write,
    )
    await wait_for_mirror(mirrored)
    assert await inspector.counts(uuid.UUID(tenant.id)) == await store_counts(db, tenant.id)
    rows = await inspector._driver.execute_query(
        "MATCH (o:Node {name: 'Muster GmbH'})-[r:IS_LED_BY]->(m:Node) WHERE o.tenant = $t "
        "RETURN m.id AS memory",
        {"t": tenant.id},
        database_=None,
    )
    assert [r["memory"] for r in rows.records] == [first.json()["id"]]


async def test_outage_delays_but_never_fails_writes(mirrored, inspector, db, falkordb):  # noqa: F811
    tenant = await make_tenant(mirrored)
    falkordb.stop()
    try:
        for i in range(5):
            stored = await mirrored.post(
                "/v1/memories",
                json={
                    "content": f"Notiz {i}: Frau Eva Roth von der Lager{i} AG ruft zurück.",
                    "relations": [
                        {"predicate": "ABOUT", "object": f"Thema {i}", "object_class": "Topic"}
                    ],
                },
                headers=tenant.write,
            )
            assert stored.status_code == 201
        await asyncio.sleep(1.0)
        report = (await mirrored.get("/ready")).json()
        assert report["status"] == "ok"  # PostgreSQL is the record: still ready
        assert report["graph_mirror"]["pending_changes"] > 0
        assert report["graph_mirror"]["status"] == "degraded"
        assert report["graph_mirror"]["last_error"]
    finally:
        falkordb.start()
    await wait_for_mirror(mirrored)
    assert await inspector.counts(uuid.UUID(tenant.id)) == await store_counts(db, tenant.id)


async def test_restart_mid_stream_then_resync(mirrored, inspector, db, falkordb):  # noqa: F811
    """The test server keeps nothing across a restart (in memory): what was drained before is
    gone there; everything after converges, and resync restores the rest."""
    tenant = await make_tenant(mirrored)
    ids = []
    for i in range(40):
        created = await mirrored.post(
            "/v1/entities",
            json={"name": f"Host {i}", "entity_class": "Host"},
            headers=tenant.write,
        )
        ids.append(created.json()["id"])
        if i == 20:
            falkordb.restart()  # while the drainer is working through the outbox
    await wait_for_mirror(mirrored)
    nodes, _ = await inspector.counts(uuid.UUID(tenant.id))
    assert 0 < nodes <= 40
    counts = await resync_tenant(db, inspector, uuid.UUID(tenant.id))
    assert counts == {"nodes": 40, "edges": 0}
    assert await inspector.counts(uuid.UUID(tenant.id)) == await store_counts(db, tenant.id)


async def test_tenants_never_share_nodes(mirrored, inspector):
    a, b = await make_tenant(mirrored), await make_tenant(mirrored)
    for tenant in (a, b):
        await mirrored.post(
            "/v1/entities",
            json={"name": "Gleicher Name", "entity_class": "Organization"},
            headers=tenant.write,
        )
    await wait_for_mirror(mirrored)
    rows = await inspector._driver.execute_query(
        "MATCH (n:Node {name: 'Gleicher Name'}) RETURN n.tenant AS tenant, n.id AS id",
        database_=None,
    )
    by_tenant = {r["tenant"] for r in rows.records}
    assert by_tenant >= {a.id, b.id} and len(rows.records) >= 2
    cross = await inspector._driver.execute_query(
        "MATCH (x:Node)-[r]-(y:Node) WHERE x.tenant <> y.tenant OR r.tenant <> x.tenant "
        "RETURN count(r) AS n",
        database_=None,
    )
    assert cross.records[0]["n"] == 0


async def test_erasure_reaches_the_mirror(mirrored, inspector, db):
    tenant = await make_tenant(mirrored)
    stored = await mirrored.post(
        "/v1/memories?wait=true",
        json={
            "title": "Ilse Quandtmann",
            "content": "Frau Ilse Quandtmann wohnt in Kassel.",
            "relations": [
                {
                    "predicate": "HAS_SKILL",
                    "subject": "Ilse Quandtmann",
                    "subject_class": "Person",
                    "object": "Buchhaltung",
                    "object_class": "Skill",
                }
            ],
        },
        headers=tenant.write,
    )
    await wait_for_mirror(mirrored)
    assert (await inspector.counts(uuid.UUID(tenant.id)))[0] >= 3
    receipt = await mirrored.delete(
        f"/v1/memories/{stored.json()['id']}?erase=true", headers=tenant.write
    )
    assert receipt.json()["graph_mirror"]["deletions_queued"] > 0
    await wait_for_mirror(mirrored)
    assert await inspector.counts(uuid.UUID(tenant.id)) == (0, 0)
    leftovers = await inspector._driver.execute_query(
        "MATCH (n:Node) WHERE n.id = $id OR n.name CONTAINS 'Quandtmann' RETURN count(n) AS n",
        {"id": stored.json()["id"]},
        database_=None,
    )
    assert leftovers.records[0]["n"] == 0
    async with db.owner_tx() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM graph_outbox")) == 0
