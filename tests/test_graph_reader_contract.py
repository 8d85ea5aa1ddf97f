"""One contract for every graph reader: the same tests over the PostgreSQL reader and the Neo4j
reader (FalkorDB Bolt test server, filled by ``graph resync``), parametrised by backend.

The graphs are built by hand through the store (no extraction), so every expected number comes
from the graph's shape: PPR scores in closed form, the nodes each hop limit reaches, which nodes
are memories. The Neo4j cases skip only when the Bolt test server cannot run here (outside a
private network namespace), and say so.
"""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from knowmind.app import create_app
from knowmind.db.engine import Database
from knowmind.graph.base import GraphReader, Walk
from knowmind.graph.neo4j_mirror import Neo4jMirror
from knowmind.graph.neo4j_reader import Neo4jGraphReader
from knowmind.graph.postgres_reader import PostgresGraphReader
from knowmind.graph.registry import BoltAccess, build_graph_reader
from knowmind.linking.names import normalise_name
from knowmind.store import edges as edge_store
from knowmind.store import entities as entity_store
from knowmind.store.tenants import create_tenant
from knowmind.workers.mirror import resync_tenant
from tests.conftest import make_tenant
from tests.graph_server import falkordb  # noqa: F401  (fixture)

D = 0.85  # damping
ITERATIONS = 500  # enough for the power iteration to reach its 1e-6 tolerance on these graphs


@dataclass
class World:
    """Two tenants' hand-built graphs; node names map to ids."""

    tenant: UUID
    other_tenant: UUID
    ids: dict[str, UUID]
    other_ids: dict[str, UUID]


async def _entity(conn, tenant: UUID, name: str) -> UUID:
    new = entity_store.NewEntity(name=name, norm_name=normalise_name(name), entity_class="Thing")
    return await entity_store.insert_entity_if_missing(conn, tenant, new)


async def _memory(conn, tenant: UUID, content: str) -> UUID:
    """A memory row alone: no chunks and no extraction job (the graph is laid by hand)."""
    memory_id = await conn.scalar(
        text(
            "INSERT INTO memories (tenant_id, content, content_sha256) "
            "VALUES (:t, :c, :sha) RETURNING id"
        ),
        {"t": tenant, "c": content, "sha": hashlib.sha256(content.encode()).digest()},
    )
    assert isinstance(memory_id, UUID)
    return memory_id


async def _link(conn, tenant: UUID, ids: dict[str, UUID], a: str, b: str, weight: float) -> None:
    kind = {True: "memory", False: "entity"}
    await edge_store.insert_edge(
        conn,
        tenant,
        from_id=ids[a],
        from_kind=kind[a.startswith("m")],
        to_id=ids[b],
        to_kind=kind[b.startswith("m")],
        predicate="RELATED_TO",
        confidence=weight,
    )


# Tenant A: a weighted star around "hub" (leaves "heavy" at 1.0 and "light" at 0.5), and a chain
# m2 - c1 - c2 - c3 - c4 - m1 (m2 - c1 a typed edge, m1 - c4 a mention at 0.5).
# Tenant B: x1 - x2, its own nodes only.
STAR = [("hub", "heavy", 1.0), ("hub", "light", 0.5)]
CHAIN = [("c1", "c2", 1.0), ("c2", "c3", 1.0), ("c3", "c4", 1.0), ("m2", "c1", 1.0)]


async def _build(db: Database, model: str, dim: int) -> World:
    async with db.owner_tx() as conn:
        tenant = (await create_tenant(conn, f"contract-{uuid.uuid4()}", "simple", model, dim)).id
        other = (await create_tenant(conn, f"contract-{uuid.uuid4()}", "simple", model, dim)).id
    ids: dict[str, UUID] = {}
    async with db.tenant_tx(tenant) as conn:
        for name in ("hub", "heavy", "light", "c1", "c2", "c3", "c4"):
            ids[name] = await _entity(conn, tenant, name)
        for name in ("m1", "m2"):
            ids[name] = await _memory(conn, tenant, f"memory {name} {uuid.uuid4()}")
        for a, b, weight in STAR + CHAIN:
            await _link(conn, tenant, ids, a, b, weight)
        await edge_store.insert_mentions(
            conn, tenant, [(ids["m1"], None, ids["c4"], "gazetteer", 0.5, 0, 2)]
        )
    other_ids: dict[str, UUID] = {}
    async with db.tenant_tx(other) as conn:
        for name in ("x1", "x2"):
            other_ids[name] = await _entity(conn, other, name)
        await _link(conn, other, other_ids, "x1", "x2", 1.0)
    return World(tenant, other, ids, other_ids)


@pytest.fixture(scope="module")
async def store_db(settings) -> AsyncIterator[Database]:
    """Writes without the outbox triggers: the Neo4j side is filled by a resync instead."""
    database = Database.connect(settings.database.database_url, None, 2, graph_mirror=False)
    yield database
    await database.dispose()


@pytest.fixture(scope="module")
async def world(store_db: Database, embedder) -> World:
    return await _build(store_db, embedder.model_id, embedder.dim)


@pytest.fixture(params=["postgres", "neo4j"], scope="module")
async def reader(request, store_db: Database, world: World) -> AsyncIterator[GraphReader]:
    """The reader of each registered backend, over the same graphs."""
    bolt = None
    if request.param == "neo4j":
        server = request.getfixturevalue("falkordb")  # skips, saying why, without a namespace
        bolt = BoltAccess(server.bolt_url)
        mirror = await Neo4jMirror.connect(server.bolt_url)
        try:
            for tenant in (world.tenant, world.other_tenant):
                await resync_tenant(store_db, mirror, tenant)
        finally:
            await mirror.close()
    graph_reader = build_graph_reader(request.param, store_db, bolt)
    yield graph_reader
    close = getattr(graph_reader, "close", None)
    if close is not None:
        await close()


async def _ppr(reader: GraphReader, tenant: UUID, seeds: dict[UUID, float], hops: int):
    return await reader.personalized_pagerank(Walk(tenant, seeds, hops, D, ITERATIONS))


async def test_ppr_on_a_weighted_star_matches_the_closed_form(reader, world):
    """Seed the hub of a star: x_hub = 1/(1+d), the leaves share d/(1+d) by edge weight."""
    ids = world.ids
    run = await _ppr(reader, world.tenant, {ids["hub"]: 1.0}, hops=1)
    assert set(run.scores) == {ids["hub"], ids["heavy"], ids["light"]}
    assert run.scores[ids["hub"]] == pytest.approx(1 / (1 + D), abs=1e-5)
    assert run.scores[ids["heavy"]] == pytest.approx(2 / 3 * D / (1 + D), abs=1e-5)
    assert run.scores[ids["light"]] == pytest.approx(1 / 3 * D / (1 + D), abs=1e-5)
    assert run.memories == set()


async def test_ppr_scores_sum_to_one_and_fall_with_distance(reader, world):
    ids = world.ids
    run = await _ppr(reader, world.tenant, {ids["c1"]: 1.0}, hops=4)
    assert sum(run.scores.values()) == pytest.approx(1.0, abs=1e-6)
    chain = [run.scores[ids[n]] for n in ("c1", "c2", "c3", "c4")]
    assert chain == sorted(chain, reverse=True)


@pytest.mark.parametrize(
    ("hops", "reached"),
    [
        (0, {"c1"}),
        (1, {"c1", "c2", "m2"}),
        (2, {"c1", "c2", "m2", "c3"}),
        (3, {"c1", "c2", "m2", "c3", "c4"}),
        (4, {"c1", "c2", "m2", "c3", "c4", "m1"}),
    ],
)
async def test_hop_limits_bound_the_nodes_reached(reader, world, hops, reached):
    run = await _ppr(reader, world.tenant, {world.ids["c1"]: 1.0}, hops=hops)
    assert set(run.scores) == {world.ids[n] for n in reached}
    subgraph = await reader.subgraph(world.tenant, [world.ids["c1"]], hops)
    assert {n for link in subgraph.links for n in link} <= {world.ids[n] for n in reached}


async def test_memory_and_entity_nodes_are_told_apart(reader, world):
    """Memories reached through a typed edge (m2) and through a mention (m1) are memories;
    entities never are."""
    run = await _ppr(reader, world.tenant, {world.ids["c1"]: 1.0}, hops=4)
    assert run.memories == {world.ids["m1"], world.ids["m2"]}
    subgraph = await reader.subgraph(world.tenant, [world.ids["c4"]], 1)
    assert subgraph.memories == {world.ids["m1"]}
    assert subgraph.links == {
        tuple(sorted((world.ids["c4"], n), key=str)): w
        for n, w in ((world.ids["m1"], 0.5), (world.ids["c3"], 1.0))
    }


async def test_tenants_never_see_each_other(reader, world):
    a, b = world.ids, world.other_ids
    # the other tenant's graph is reachable only from inside that tenant
    own = await _ppr(reader, world.other_tenant, {b["x1"]: 1.0}, hops=3)
    assert set(own.scores) == {b["x1"], b["x2"]}
    crossed = await _ppr(reader, world.other_tenant, {a["hub"]: 1.0}, hops=3)
    assert crossed.scores == {a["hub"]: 1.0} and crossed.memories == set()
    assert (await reader.subgraph(world.tenant, [b["x1"]], 3)).links == {}


async def test_empty_seeds_give_an_empty_result(reader, world):
    run = await _ppr(reader, world.tenant, {}, hops=2)
    assert run.scores == {} and run.memories == set()
    assert (await reader.subgraph(world.tenant, [], 2)).links == {}


async def test_unknown_ids_reach_nothing_and_keep_their_reset_mass(reader, world):
    unknown = uuid.uuid4()
    run = await _ppr(reader, world.tenant, {unknown: 1.0}, hops=2)
    assert run.scores == {unknown: 1.0} and run.memories == set()
    mixed = await _ppr(reader, world.tenant, {unknown: 1.0, world.ids["hub"]: 1.0}, hops=1)
    # an isolated seed returns its mass to the reset vector: x = (1-d)/2 + d·x/2
    assert mixed.scores[unknown] == pytest.approx(0.5 * (1 - D) / (1 - 0.5 * D), abs=1e-5)
    assert set(mixed.scores) == {unknown, world.ids["hub"], world.ids["heavy"], world.ids["light"]}


# The agreement of both backends on a graph written through the API and drained by the mirror
# worker (not a resync): the outbox path end to end.


@pytest.fixture(scope="module")
async def mirrored(settings, embedder, falkordb):  # noqa: F811
    mirrored_settings = settings.with_overrides(
        neo4j_url=falkordb.bolt_url, graph_retry_max_seconds=0.5
    )
    async with AsyncTestClient(app=create_app(mirrored_settings, embedder=embedder)) as client:
        yield client


async def _wait_for_mirror(client, rounds: int = 200) -> None:
    report: dict = {}
    for _ in range(rounds):
        report = (await client.get("/ready")).json()["graph_mirror"]
        if report["pending_changes"] == 0 and report["status"] == "ok":
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"mirror did not catch up: {report}")


async def test_postgres_and_neo4j_backends_agree(mirrored, db, falkordb):  # noqa: F811
    """The same PPR ranking from both backends on the same graph."""
    tenant = await make_tenant(mirrored)
    names = {}
    for name, cls in [
        ("Anna", "Person"),
        ("Acme AG", "Organization"),
        ("Ben", "Person"),
        ("Webshop", "Application"),
        ("box-1", "Container"),
        ("srv-1", "Host"),
    ]:
        created = await mirrored.post(
            "/v1/entities", json={"name": name, "entity_class": cls}, headers=tenant.write
        )
        names[name] = created.json()["id"]
    for a, p, b in [
        ("Anna", "WORKS_FOR", "Acme AG"),
        ("Ben", "WORKS_FOR", "Acme AG"),
        ("Acme AG", "DEVELOPS", "Webshop"),
        ("Webshop", "DEPLOYED_TO", "box-1"),
        ("box-1", "HOSTED_ON", "srv-1"),
        ("Anna", "KNOWS", "Ben"),
    ]:
        await mirrored.post(
            "/v1/relations",
            json={"from_id": names[a], "to_id": names[b], "rel_type": p},
            headers=tenant.write,
        )
    for content in ["Anna betreut den Webshop.", "srv-1 steht in Kassel.", "Ben mag Acme AG."]:
        await mirrored.post(
            "/v1/memories?wait=true", json={"content": content}, headers=tenant.write
        )
    await _wait_for_mirror(mirrored)
    tenant_id = uuid.UUID(tenant.id)
    seeds = {uuid.UUID(names["Anna"]): 1.0, uuid.UUID(names["srv-1"]): 0.5}
    neo4j = Neo4jGraphReader(falkordb.bolt_url)
    try:
        assert await neo4j.has_gds() is False  # the test server has no GDS: power iteration
        for hops in (1, 2, 3):
            walk = Walk(tenant_id, seeds, hops, 0.85, 20)
            pg = await PostgresGraphReader(db).personalized_pagerank(walk)
            nj = await neo4j.personalized_pagerank(walk)
            assert pg.memories == nj.memories
            assert set(pg.scores) == set(nj.scores)
            for node, score in pg.scores.items():
                assert nj.scores[node] == pytest.approx(score, abs=1e-6)  # float32 weights
            ranking = sorted(pg.scores, key=lambda n: (-round(pg.scores[n], 6), str(n)))
            assert ranking == sorted(nj.scores, key=lambda n: (-round(nj.scores[n], 6), str(n)))
    finally:
        await neo4j.close()
    async with db.owner_tx() as conn:
        assert await conn.scalar(text("SELECT count(*) FROM graph_outbox")) == 0
