"""The graph stage's budget: it does not wait for hits beyond its budget, it caps its seeds, and
the PostgreSQL subgraph read caps links per node and nodes in all (a hub on a real table)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Sequence
from uuid import UUID

import pytest
from sqlalchemy import text

from knowmind.graph.base import PPRRun, Subgraph, Walk
from knowmind.graph.postgres_reader import PostgresGraphReader
from knowmind.linking.matching import MatchedEntity
from knowmind.recall.base import Candidate, RecallRequest, StageContext
from knowmind.recall.graph import GraphStage
from knowmind.store.edges import neighbour_links
from knowmind.store.entities import search_entities_many
from knowmind.store.lexical import similar_lexemes
from tests.conftest import make_tenant


class RecordingReader:
    """Test double for a graph backend: records the seeds it is asked to walk from and finds
    nothing, so the stage's seeding is what the test observes."""

    name = "recording"

    def __init__(self) -> None:
        self.seeds: list[dict[UUID, float]] = []

    async def subgraph(
        self, tenant_id: UUID, seeds: Sequence[UUID], hops: int, max_nodes: int = 5000
    ) -> Subgraph:
        return Subgraph()

    async def personalized_pagerank(self, walk: Walk) -> PPRRun:
        self.seeds.append(dict(walk.seeds))
        return PPRRun(dict(walk.seeds), set(), 1, "recorded")


def _context(db, entities: list[MatchedEntity], never: asyncio.Future) -> StageContext:
    async def no_embedding():  # the graph stage must never ask for it
        raise AssertionError("the graph stage asked for the query embedding")

    async def question_entities() -> list[MatchedEntity]:
        return entities

    async def results_of(stage: str) -> list[Candidate]:
        return await asyncio.shield(never)  # the text stages are still running

    return StageContext(db, no_embedding, question_entities, results_of)


def _query(tenant: UUID) -> RecallRequest:
    return RecallRequest(text="Wo arbeitet Anna?", tenant_id=tenant, candidates=10, explain=True)


async def test_graph_stage_seeds_from_the_question_when_hits_are_late(db):
    never: asyncio.Future = asyncio.get_running_loop().create_future()
    entities = [MatchedEntity(uuid.uuid4(), "Anna", "Person", 1.0, "anna")]
    ctx = _context(db, entities, never)
    reader = RecordingReader()
    stage = GraphStage(reader, hit_wait_s=0.05)
    started = time.perf_counter()
    await stage.search(_query(uuid.uuid4()), ctx)
    assert time.perf_counter() - started < 2.0  # the hits never came; the stage did not hang
    assert reader.seeds == [{entities[0].id: 1.0}]
    assert ctx.explain["graph_hits_used"] == []
    assert ctx.explain["graph_hits_late"] == ["bm25", "vector"]
    assert not never.cancelled()  # waiting less did not cancel the stages themselves


async def test_graph_stage_keeps_only_the_heaviest_seeds(db):
    never: asyncio.Future = asyncio.get_running_loop().create_future()
    entities = [
        MatchedEntity(uuid.uuid4(), f"E{i}", "Thing", 1.0 - i / 100, f"e{i}") for i in range(40)
    ]
    reader = RecordingReader()
    await GraphStage(reader, hit_wait_s=0.01, max_seeds=5).search(
        _query(uuid.uuid4()), _context(db, entities, never)
    )
    assert set(reader.seeds[0]) == {e.id for e in entities[:5]}


@pytest.fixture(scope="module")
async def hub(client, db) -> tuple[UUID, UUID]:
    """A tenant with one entity that 120 memories mention."""
    tenant = await make_tenant(client)
    async with db.owner_tx() as conn:
        entity = await conn.scalar(
            text(
                "INSERT INTO entities (tenant_id, name, norm_name, entity_class) "
                "VALUES (:t, 'Hub', 'hub', 'Organisation') RETURNING id"
            ),
            {"t": tenant.id},
        )
        await conn.execute(
            text(
                "WITH m AS (INSERT INTO memories (tenant_id, content, content_sha256) "
                "SELECT CAST(:t AS uuid), 'hub memory ' || i, sha256(('hub memory ' || i)::bytea) "
                "FROM generate_series(1, 120) i RETURNING id) "
                "INSERT INTO mentions (tenant_id, memory_id, entity_id, method) "
                "SELECT CAST(:t AS uuid), m.id, :e, 'gazetteer' FROM m"
            ),
            {"t": tenant.id, "e": entity},
        )
    return UUID(tenant.id), entity


async def test_links_of_a_hub_are_capped_per_node_and_in_all(db, hub):
    tenant, entity = hub
    async with db.tenant_tx(tenant) as conn:
        everything = await neighbour_links(conn, tenant, [entity], per_node=1000)
        per_node = await neighbour_links(conn, tenant, [entity], per_node=30)
        in_all = await neighbour_links(conn, tenant, [entity], per_node=1000, max_links=7)
    assert len(everything) == 120
    assert len(per_node) == 30 and set(per_node) <= set(everything)
    assert len(in_all) == 7


async def test_links_of_known_kinds_skip_only_the_look_ups_that_cannot_match(db, hub):
    """A memory's mentions are read by memory, an entity's by entity: told which frontier nodes
    are memories (the rest are entities) the other look-up is skipped and the links, in their
    order, are the same."""
    tenant, entity = hub
    async with db.tenant_tx(tenant) as conn:
        memories = [
            r[0]
            for r in await conn.execute(
                text("SELECT memory_id FROM mentions WHERE tenant_id = :t ORDER BY memory_id"),
                {"t": tenant},
            )
        ][:25]
        frontier = [entity, *memories]
        truth = {str(m) for m in memories}
        blind = await neighbour_links(conn, tenant, frontier, per_node=1000)
        told = await neighbour_links(conn, tenant, frontier, per_node=1000, memories=truth)
        # told wrongly, the look-ups that could have matched are skipped: the kinds are used
        wrong = {str(entity)}
        misled = await neighbour_links(conn, tenant, frontier, per_node=1000, memories=wrong)
    assert len(blind) == 120 + 25
    assert told == blind
    assert misled == []


async def test_postgres_reader_stays_within_its_node_budget(db, hub):
    tenant, entity = hub
    reader = PostgresGraphReader(db, max_nodes=50, links_per_node=1000)
    run = await reader.personalized_pagerank(Walk(tenant, {entity: 1.0}, 2, 0.85, 20))
    assert len(run.scores) <= 50
    assert len(run.memories) == 49  # the hub and the first 49 memories reached
    unbounded = await PostgresGraphReader(db).personalized_pagerank(
        Walk(tenant, {entity: 1.0}, 2, 0.85, 20)
    )
    assert len(unbounded.memories) == 40  # default: 40 links per node


async def test_trigram_lookups_never_scan_the_table(db, hub):
    """The fuzzy look-ups (entity names, typo corrections) walk the trigram index even where a
    table is small enough (1.5k names) that a scan looks cheaper to the planner: a scan computes
    the trigrams of every row for every phrase (22 ms p50 of a 100k-chunk recall)."""
    tenant, entity = hub
    async with db.owner_tx() as conn:
        await conn.execute(
            text(
                "INSERT INTO entity_names (tenant_id, entity_id, norm_name, is_alias) "
                "SELECT CAST(:t AS uuid), CAST(:e AS uuid), 'hub', false UNION ALL "
                "SELECT CAST(:t AS uuid), CAST(:e AS uuid), 'alias number ' || i, true "
                "FROM generate_series(1, 1500) i "
                "ON CONFLICT DO NOTHING"
            ),
            {"t": tenant, "e": entity},
        )
        await conn.execute(text("ANALYZE entity_names"))
    seq_scans = (
        "SELECT pg_stat_get_xact_numscans('entity_names'::regclass)"
        " + pg_stat_get_xact_numscans('bm25_lexemes'::regclass)"
    )
    async with db.tenant_tx(tenant) as conn:
        before = await conn.scalar(text(seq_scans))
        names = await search_entities_many(conn, tenant, ["hubb", "hub memory"], 3)
        await similar_lexemes(conn, tenant, ["memroy"], 0.45, per_term=2)
        after = await conn.scalar(text(seq_scans))
    assert [row.name for row in names["hubb"]] == ["Hub"]  # found, through the index
    assert after == before
