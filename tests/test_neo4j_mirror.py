"""The Neo4j mirror through the real neo4j driver: against FalkorDB's Bolt endpoint here (inside a
private network namespace), and against a real Neo4j 5 when ``NEO4J_URL`` is set."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from neo4j import AsyncDriver, AsyncGraphDatabase
from neo4j.exceptions import Neo4jError, ServiceUnavailable, SessionExpired

from knowmind.graph.changes import GraphChange
from knowmind.graph.neo4j_mirror import _UPSERT_NODE, MAX_REQUEST_BYTES, Neo4jMirror
from tests.graph_server import (  # noqa: F401
    SKIP_REASON,
    FalkorServer,
    falkordb,
    in_private_network_namespace,
    start_falkordb,
)


def uid() -> str:
    return str(uuid.uuid4())


def node(t: uuid.UUID, id_: str, kind: str = "entity", name: str = "n", cls: str | None = None):
    payload = {"id": id_, "kind": kind, "name": name, "entity_class": cls}
    return GraphChange(t, "upsert_node", payload)


def edge(t: uuid.UUID, id_: str, a: str, b: str, pred: str = "WORKS_FOR", conf: float = 0.9):
    payload = {"id": id_, "from_id": a, "to_id": b, "predicate": pred, "confidence": conf}
    return GraphChange(t, "upsert_edge", payload | {"derived": False})


def del_node(t: uuid.UUID, id_: str, kind: str = "entity") -> GraphChange:
    return GraphChange(t, "delete_node", {"id": id_, "kind": kind})


def del_edge(t: uuid.UUID, id_: str, pred: str = "WORKS_FOR") -> GraphChange:
    return GraphChange(t, "delete_edge", {"id": id_, "predicate": pred})


async def records(driver: AsyncDriver, query: str, **params: Any) -> list[dict[str, Any]]:
    """Read with an inspection driver of our own (a few tries: the server may have restarted)."""
    for attempt in range(3):
        try:
            async with driver.session(database=None) as session:
                return [record.data() async for record in await session.run(query, params)]
        except (ServiceUnavailable, SessionExpired):
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


async def tenant_nodes(driver: AsyncDriver, t: uuid.UUID) -> dict[str, dict[str, Any]]:
    rows = await records(
        driver,
        "MATCH (n:Node {tenant: $t}) RETURN n.id AS id, labels(n) AS labels, n.tenant AS tenant,"
        " n.kind AS kind, n.name AS name, n.entity_class AS entity_class",
        t=str(t),
    )
    return {row["id"]: row for row in rows}


async def tenant_rels(driver: AsyncDriver, t: uuid.UUID) -> dict[str, dict[str, Any]]:
    rows = await records(
        driver,
        "MATCH (a:Node)-[r]->(b:Node) WHERE r.tenant = $t OR a.tenant = $t OR b.tenant = $t"
        " RETURN r.id AS id, type(r) AS type, r.tenant AS tenant, r.confidence AS confidence,"
        " r.derived AS derived, a.id AS from_id, b.id AS to_id, a.tenant AS from_tenant,"
        " b.tenant AS to_tenant",
        t=str(t),
    )
    return {row["id"]: row for row in rows}


@pytest.fixture(scope="session")
async def mirror(falkordb: FalkorServer) -> AsyncIterator[Neo4jMirror]:  # noqa: F811
    m = await Neo4jMirror.connect(falkordb.bolt_url)
    await m.ensure_schema()
    yield m
    await m.close()


@pytest.fixture(scope="session")
async def graph(falkordb: FalkorServer) -> AsyncIterator[AsyncDriver]:  # noqa: F811
    driver = AsyncGraphDatabase.driver(falkordb.bolt_url, auth=None, connection_timeout=2)
    yield driver
    await driver.close()


# --- no server needed ------------------------------------------------------------------------


def test_chunks_respect_row_and_byte_limits() -> None:
    m = Neo4jMirror.__new__(Neo4jMirror)
    m.batch_size = 30
    rows = [{"id": uid(), "tenant": uid(), "name": "é" * (i % 101)} for i in range(200)]
    chunks = list(m._chunks(_UPSERT_NODE, rows))
    assert [row for chunk in chunks for row in chunk] == rows
    for chunk in chunks:
        assert len(chunk) <= 30
        payload = json.dumps(chunk, ensure_ascii=False).encode()
        assert len(_UPSERT_NODE.encode()) + len(payload) <= MAX_REQUEST_BYTES
    small = [{"id": str(i)} for i in range(65)]
    assert [len(c) for c in m._chunks(_UPSERT_NODE, small)] == [30, 30, 5]


@pytest.mark.parametrize(
    "change",
    [
        GraphChange(uuid.uuid4(), "upsert_edge", {"id": "e", "from_id": "a", "to_id": "b",
                    "predicate": "WORKS_FOR]->() DETACH DELETE (", "confidence": 1.0,
                    "derived": False}),
        GraphChange(uuid.uuid4(), "delete_edge", {"id": "e", "predicate": "works_for"}),
        GraphChange(uuid.uuid4(), "upsert_node", {"id": "n", "kind": "person", "name": "x",
                    "entity_class": None}),
        GraphChange(uuid.uuid4(), "upsert_node", {"id": "n", "kind": "entity"}),
        GraphChange(uuid.uuid4(), "rename_node", {"id": "n"}),
    ],
)  # fmt: skip
async def test_invalid_changes_raise_before_anything_is_sent(change: GraphChange) -> None:
    m = Neo4jMirror.__new__(Neo4jMirror)  # no driver at all: validation comes first
    m.batch_size = 30
    m._indexed_types = set()
    with pytest.raises(ValueError):
        await m.apply([change])


def test_private_namespace_detection_matches_the_interfaces() -> None:
    lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    names = {line.split(":")[0].strip() for line in lines}
    assert in_private_network_namespace() == (names == {"lo"})


# --- FalkorDB over Bolt ----------------------------------------------------------------------


async def test_upserts_create_tenant_nodes_and_typed_relationships(
    mirror: Neo4jMirror, graph: AsyncDriver
) -> None:
    t = uuid.uuid4()
    ada, acme, mem, works, mentions = uid(), uid(), uid(), uid(), uid()
    await mirror.apply(
        [
            node(t, ada, name="Ada Lovelace", cls="Person"),
            node(t, acme, name="Acme", cls="Organization"),
            node(t, mem, kind="memory", name="Ada joined Acme"),
            edge(t, works, ada, acme, conf=0.75),
            edge(t, mentions, mem, ada, pred="MENTIONS", conf=1.0),
        ]
    )
    assert await mirror.counts(t) == (3, 2)
    nodes = await tenant_nodes(graph, t)
    assert set(nodes[ada]["labels"]) == {"Node", "Entity"}
    assert set(nodes[mem]["labels"]) == {"Node", "Memory"}
    assert nodes[ada] | {"labels": None} == {
        "id": ada, "labels": None, "tenant": str(t), "kind": "entity", "name": "Ada Lovelace",
        "entity_class": "Person",
    }  # fmt: skip
    assert nodes[mem]["entity_class"] is None and nodes[mem]["kind"] == "memory"
    rels = await tenant_rels(graph, t)
    assert rels[works] == {
        "id": works, "type": "WORKS_FOR", "tenant": str(t), "confidence": 0.75, "derived": False,
        "from_id": ada, "to_id": acme, "from_tenant": str(t), "to_tenant": str(t),
    }  # fmt: skip
    assert (rels[mentions]["type"], rels[mentions]["from_id"]) == ("MENTIONS", mem)


async def test_names_with_quotes_and_backslashes_arrive_intact(
    mirror: Neo4jMirror, graph: AsyncDriver
) -> None:
    """A turn like "What's up?" or a name like O'Brien once stalled the whole mirror: the
    test server splices string parameters into quotes (Neo4j does not)."""
    t = uuid.uuid4()
    names = {uid(): "What's up, O'Brien?", uid(): "C:\\data\\'x'", uid(): 'Zoë\'s "Café"'}
    await mirror.apply([node(t, i, kind="memory", name=n) for i, n in names.items()])
    nodes = await tenant_nodes(graph, t)
    assert {i: nodes[i]["name"] for i in names} == names


async def test_applying_the_same_batch_twice_is_idempotent(
    mirror: Neo4jMirror, graph: AsyncDriver
) -> None:
    t = uuid.uuid4()
    a, b, c, e1, e2 = uid(), uid(), uid(), uid(), uid()
    batch = [node(t, a), node(t, b), node(t, c), edge(t, e1, a, b), edge(t, e2, b, c, "KNOWS")]
    await mirror.apply(batch)
    first = (await mirror.counts(t), await tenant_nodes(graph, t), await tenant_rels(graph, t))
    await mirror.apply(batch)
    await mirror.apply(batch[3:] + batch[:3])
    assert (await mirror.counts(t), await tenant_nodes(graph, t), await tenant_rels(graph, t)) == (
        first
    )
    assert first[0] == (3, 2)
    # an upsert of an existing id updates it in place; the last change for an id wins
    await mirror.apply(
        [node(t, a, name="old"), node(t, a, name="new"), edge(t, e1, a, b, conf=0.1)]
    )
    assert await mirror.counts(t) == (3, 2)
    assert (await tenant_nodes(graph, t))[a]["name"] == "new"
    assert (await tenant_rels(graph, t))[e1]["confidence"] == 0.1


async def test_deletes_propagate_and_deleting_missing_things_is_a_no_op(
    mirror: Neo4jMirror, graph: AsyncDriver
) -> None:
    t = uuid.uuid4()
    a, b, c, e1, e2, e3 = uid(), uid(), uid(), uid(), uid(), uid()
    await mirror.apply(
        [
            node(t, a),
            node(t, b),
            node(t, c),
            edge(t, e1, a, b),
            edge(t, e2, b, c),
            edge(t, e3, c, a),
        ]
    )
    assert await mirror.counts(t) == (3, 3)
    await mirror.apply([del_edge(t, e1)])
    assert await mirror.counts(t) == (3, 2)
    assert set(await tenant_rels(graph, t)) == {e2, e3}
    await mirror.apply([del_node(t, c)])  # DETACH: its two relationships go with it
    assert await mirror.counts(t) == (2, 0)
    await mirror.apply(
        [del_node(t, c), del_edge(t, e1), del_edge(t, uid(), "NEVER_SEEN"), del_node(t, uid())]
    )
    assert await mirror.counts(t) == (2, 0)
    # delete then re-create within one batch: order is kept
    await mirror.apply([del_node(t, a), node(t, a, name="again"), edge(t, e1, a, b)])
    assert await mirror.counts(t) == (2, 1)
    assert (await tenant_nodes(graph, t))[a]["name"] == "again"


async def test_an_edge_that_arrives_before_its_nodes_stays_attached(
    mirror: Neo4jMirror, graph: AsyncDriver
) -> None:
    t = uuid.uuid4()
    a, b, e = uid(), uid(), uid()
    c, e2, e3 = uid(), uid(), uid()  # two edges in one request share a missing endpoint
    await mirror.apply([edge(t, e, a, b, "MENTIONS"), edge(t, e2, a, c, "MENTIONS")])
    await mirror.apply([edge(t, e3, c, b, "KNOWS")])
    assert await mirror.counts(t) == (3, 3)
    await mirror.apply([node(t, a, kind="memory", name="note"), node(t, b, name="Bob")])
    assert await mirror.counts(t) == (3, 3)
    nodes = await tenant_nodes(graph, t)
    assert set(nodes[a]["labels"]) == {"Node", "Memory"} and nodes[b]["name"] == "Bob"
    rel = (await tenant_rels(graph, t))[e]
    assert (rel["from_id"], rel["to_id"], rel["type"]) == (a, b, "MENTIONS")


async def test_interleaved_tenants_never_mix(mirror: Neo4jMirror, graph: AsyncDriver) -> None:
    ta, tb = uuid.uuid4(), uuid.uuid4()
    ids = {ta: [uid() for _ in range(6)], tb: [uid() for _ in range(6)]}
    batch: list[GraphChange] = []
    for i in range(6):  # one UNWIND group holds rows of both tenants
        batch += [node(ta, ids[ta][i], name=f"a{i}"), node(tb, ids[tb][i], name=f"b{i}")]
    edge_ids: dict[uuid.UUID, list[str]] = {ta: [], tb: []}
    for i in range(5):
        for t in (ta, tb):
            edge_ids[t].append(uid())
            batch.append(edge(t, edge_ids[t][-1], ids[t][i], ids[t][i + 1], "KNOWS"))
    await mirror.apply(batch[:7])
    await mirror.apply(batch[7:])
    # a change that names another tenant's node must not touch it (ids are unique in practice)
    await mirror.apply(
        [node(tb, ids[ta][0], name="hijack"), edge(tb, uid(), ids[tb][0], ids[ta][1], "KNOWS")]
    )
    for t, other in ((ta, tb), (tb, ta)):
        nodes = await tenant_nodes(graph, t)
        assert set(nodes) == set(ids[t])
        assert {n["tenant"] for n in nodes.values()} == {str(t)}
        rels = await tenant_rels(graph, t)
        assert set(rels) == set(edge_ids[t])
        for rel in rels.values():
            assert {rel["tenant"], rel["from_tenant"], rel["to_tenant"]} == {str(t)}
        assert str(other) not in json.dumps([nodes, rels])
        assert await mirror.counts(t) == (6, 5)
    assert (await tenant_nodes(graph, ta))[ids[ta][0]]["name"] == "a0"


async def test_a_large_batch_with_long_names_is_split_and_succeeds(
    mirror: Neo4jMirror,
    graph: AsyncDriver,
    falkordb: FalkorServer,  # noqa: F811
) -> None:
    t = uuid.uuid4()
    ids = [uid() for _ in range(90)]
    names = [(f"{i:03d} " + ("ü" if i % 3 == 0 else "x") * 200)[:100] for i in range(90)]
    batch = [
        node(t, id_, name=name, cls="LongClassName" * 3)
        for id_, name in zip(ids, names, strict=True)
    ]
    batch += [edge(t, uid(), ids[i], ids[i + 1], "RELATED_TO_SOMETHING_LONG") for i in range(89)]
    await mirror.apply(batch)
    assert await mirror.counts(t) == (90, 89)
    stored = await tenant_nodes(graph, t)
    assert [stored[id_]["name"] for id_ in ids] == names
    assert falkordb.running and await mirror.ping()


async def test_delete_tenant_removes_only_that_tenant(
    mirror: Neo4jMirror, graph: AsyncDriver
) -> None:
    ta, tb = uuid.uuid4(), uuid.uuid4()
    a_ids = [uid() for _ in range(450)]  # more than one 200-node delete round
    batch = [node(ta, i) for i in a_ids] + [edge(ta, uid(), a_ids[0], i) for i in a_ids[1:40]]
    b_ids = [uid() for _ in range(5)]
    batch += [node(tb, i) for i in b_ids] + [edge(tb, uid(), b_ids[0], b_ids[1])]
    await mirror.apply(batch)
    assert await mirror.counts(ta) == (450, 39)
    await mirror.delete_tenant(ta)
    assert await mirror.counts(ta) == (0, 0)
    assert await tenant_rels(graph, ta) == {}
    assert await mirror.counts(tb) == (5, 1)
    await mirror.delete_tenant(ta)  # nothing left: a no-op


async def test_schema_indexes_exist_and_ensure_schema_is_repeatable(
    mirror: Neo4jMirror, graph: AsyncDriver
) -> None:
    await mirror.ensure_schema()
    await mirror.apply([edge(uuid.uuid4(), uid(), uid(), uid(), "INDEXED_TYPE")])
    await mirror.apply([edge(uuid.uuid4(), uid(), uid(), uid(), "INDEXED_TYPE")])
    indexed = {
        (row["label"], prop)
        for row in await records(graph, "CALL db.indexes() YIELD label, properties")
        for prop in row["properties"]
    }
    assert {("Node", "id"), ("Node", "tenant")} <= indexed
    assert {("INDEXED_TYPE", "id"), ("INDEXED_TYPE", "tenant")} <= indexed


async def test_the_mirror_recovers_after_a_server_restart(tmp_path: Path) -> None:
    if not in_private_network_namespace():
        pytest.skip(SKIP_REASON)
    server = start_falkordb(tmp_path / "restart")
    try:
        m = await Neo4jMirror.connect(server.bolt_url)
        try:
            await m.ensure_schema()
            t = uuid.uuid4()
            a, b = uid(), uid()
            await m.apply([node(t, a), node(t, b), edge(t, uid(), a, b)])
            assert await m.counts(t) == (2, 1)
            server.restart()  # nothing is saved: the graph comes back empty
            await m.apply([node(t, a), node(t, b), edge(t, uid(), a, b, "KNOWS")])
            assert await m.counts(t) == (2, 1)
            assert await m.ping()
            server.stop()
            assert not await m.ping()
            with pytest.raises((ServiceUnavailable, SessionExpired)):
                await m.apply([node(t, uid())])
            server.start()
            await m.apply([node(t, uid())])  # the same mirror, no reconnect by the caller
            assert await m.counts(t) == (1, 0)
        finally:
            await m.close()
    finally:
        server.stop()


# --- a real Neo4j 5 (only when NEO4J_URL is set) ---------------------------------------------


@pytest.fixture(scope="session")
async def neo4j_mirror() -> AsyncIterator[Neo4jMirror]:
    url = os.environ.get("NEO4J_URL")
    if not url:
        pytest.skip("needs a real Neo4j server: set NEO4J_URL")
    m = await Neo4jMirror.connect(
        url, os.environ.get("NEO4J_USER"), os.environ.get("NEO4J_PASSWORD")
    )
    await m.ensure_schema()
    yield m
    await m.close()


async def test_neo4j_a_failed_batch_leaves_nothing(neo4j_mirror: Neo4jMirror) -> None:
    t = uuid.uuid4()
    bad = node(t, uid(), cls={"a map": "is no property value"})  # type: ignore[arg-type]
    with pytest.raises(Neo4jError):
        await neo4j_mirror.apply([node(t, uid()), edge(t, uid(), uid(), uid()), bad])
    assert await neo4j_mirror.counts(t) == (0, 0)


async def test_neo4j_round_trip_and_named_indexes(neo4j_mirror: Neo4jMirror) -> None:
    t = uuid.uuid4()
    a, b, e = uid(), uid(), uid()
    try:
        await neo4j_mirror.apply([edge(t, e, a, b, "WORKS_FOR"), node(t, a), node(t, b)])
        await neo4j_mirror.apply([edge(t, e, a, b, "WORKS_FOR"), node(t, a), node(t, b)])
        assert await neo4j_mirror.counts(t) == (2, 1)
        names = {
            record["name"]
            for record in (
                await neo4j_mirror._driver.execute_query("SHOW INDEXES YIELD name RETURN name")
            ).records
        }
        assert {"knowmind_node_id", "knowmind_node_tenant"} <= names
        assert {"knowmind_rel_works_for_id", "knowmind_rel_works_for_tenant"} <= names
        await neo4j_mirror.apply([del_node(t, a)])
        assert await neo4j_mirror.counts(t) == (1, 0)
    finally:
        await neo4j_mirror.delete_tenant(t)
    assert await neo4j_mirror.counts(t) == (0, 0)
