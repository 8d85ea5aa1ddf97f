"""The recall read path: raw asyncpg sessions scoped to one tenant (``Database.read``), the
``:name`` → ``$n`` statements of ``store.sql``, and what runs on them."""

from __future__ import annotations

from collections.abc import Collection
from uuid import UUID

import asyncpg
import pytest

from knowmind.db.engine import Database
from knowmind.graph.base import breadth_first
from knowmind.store import lexical
from knowmind.store.search import MemoryFilters
from knowmind.store.sql import fetch, positional
from knowmind.store.vector_search import vector_candidates
from tests.conftest import make_tenant
from tests.test_vector_search import _query, _seed


def test_named_parameters_become_numbered_ones():
    sql, names = positional("SELECT CAST(:a AS int[]), :b::text, x::uuid, :a + 1 WHERE z=:b_2")
    assert names == ("a", "b", "b_2")
    assert sql == "SELECT CAST($1 AS int[]), $2::text, x::uuid, $1 + 1 WHERE z=$3"


@pytest.fixture(scope="module")
async def two_tenants(client, db) -> tuple[UUID, UUID]:
    first, second = await make_tenant(client), await make_tenant(client)
    await _seed(db, first.id, 12, seed=71)
    await _seed(db, second.id, 5, seed=72)
    return UUID(first.id), UUID(second.id)


async def _count(db: Database, tenant: UUID) -> int:
    async with db.read(tenant) as conn:
        rows = await fetch(conn, "SELECT count(*) FROM chunks", {})
    return int(rows[0][0])


async def test_one_session_serves_tenants_in_turn_without_leaking(settings, two_tenants):
    """A single pooled connection: each use sees exactly its own tenant's rows, whatever the
    tenant of the use before (the session's scope is switched, not left behind)."""
    first, second = two_tenants
    db = Database.connect(settings.database.database_url, None, 1)
    try:
        for tenant, rows in [(first, 12), (second, 5), (second, 5), (first, 12), (second, 5)]:
            assert await _count(db, tenant) == rows
    finally:
        await db.dispose()


async def test_read_sessions_refuse_writes(db, two_tenants):
    first, _ = two_tenants
    async with db.read(first) as conn:
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            await conn.execute("DELETE FROM chunks")
    assert await _count(db, first) == 12


async def test_a_failed_statement_leaves_the_session_usable_and_scoped(settings, two_tenants):
    first, second = two_tenants
    db = Database.connect(settings.database.database_url, None, 1)
    try:
        with pytest.raises(asyncpg.PostgresError):
            async with db.read(first) as conn:
                await conn.fetch("SELECT 1 / 0")
        assert await _count(db, second) == 5
        assert await _count(db, first) == 12
    finally:
        await db.dispose()


async def test_vector_search_on_a_read_session_matches_a_sqlalchemy_transaction(db, two_tenants):
    """Both paths give the same rows on a read session (autocommit; the HNSW path opens a
    transaction for its settings) as inside a SQLAlchemy tenant transaction."""
    first, _ = two_tenants
    query = _query(5)
    found = {}
    for path in ("exact", "hnsw"):
        async with db.read(first) as conn:
            raw = await vector_candidates(conn, first, query, MemoryFilters(), 5, path=path)
            assert not conn.is_in_transaction()
        async with db.tenant_tx(first) as conn:
            wrapped = await vector_candidates(conn, first, query, MemoryFilters(), 5, path=path)
        assert [c for c, _, _ in raw] == [c for c, _, _ in wrapped], path
        found[path] = raw
    async with db.read(first) as conn:
        every = await vector_candidates(conn, first, query, MemoryFilters(), 12, path="exact")
    assert len(found["exact"]) == 5 and len(every) == 12
    # the global index walk may end before it meets this 12-row tenant among the session's
    # other rows (its documented "fewer than limit"); what it returns is the tenant's own
    assert {c for c, _, _ in found["hnsw"]} <= {c for c, _, _ in every}


async def test_the_questions_own_stopwords_are_dropped(db, two_tenants):
    """An English question on a German tenant: German analysis keeps "the" and "of" (not German
    stopwords); with the question's own language named, they are dropped."""
    first, _ = two_tenants
    question = "the capital of the state"
    async with db.read(first) as conn:
        both, _, _ = await lexical.analyse_query(conn, first, ["german", "english"], question)
        own, _, _ = await lexical.analyse_query(
            conn, first, ["german", "english"], question, stopwords_of="english"
        )
    assert {"the", "of"} <= set(both)
    assert not {"the", "of"} & set(own)
    assert {"capital", "capit", "stat", "state"} <= set(own)


async def test_breadth_first_expands_only_the_most_strongly_tied_frontier():
    """Test double for the link source: a star of 10 leaves around the seed, leaf i tied with
    weight i; each leaf has a memory of its own, linked to nothing else. With a frontier of 3
    only the 3 strongest leaves are expanded in the second hop; each hop after the seeds' is told
    which frontier nodes are memories (none of the leaves, all of the third hop's); the seeds'
    kinds are not known."""
    asked: list[list[str]] = []
    memories_asked: list[set[str] | None] = []

    async def links_of(
        frontier: list[str], memories: Collection[str] | None
    ) -> list[tuple[str, str, str, str, float]]:
        asked.append(sorted(frontier))
        memories_asked.append(None if memories is None else set(memories))
        if frontier == ["seed"]:
            return [("seed", "entity", f"leaf{i}", "entity", float(i)) for i in range(10)]
        if all(node.endswith("-far") for node in frontier):
            return []
        return [(node, "entity", f"{node}-far", "memory", 1.0) for node in frontier]

    graph = await breadth_first(["seed"], 3, 100, links_of, max_frontier=3)
    assert asked[1] == ["leaf7", "leaf8", "leaf9"]
    assert memories_asked == [None, set(), {"leaf7-far", "leaf8-far", "leaf9-far"}]
    assert graph.memories == {"leaf7-far", "leaf8-far", "leaf9-far"}
    assert len(graph.links) == 13


REPLANNED = "SELECT count(*) FROM memories WHERE tenant_id = :t"


async def test_size_dependent_statements_are_planned_for_each_execution(db, two_tenants):
    """A replanned statement never runs a generic plan however often it runs (the same
    prepared statement, custom plans forced in its transaction), even where the session
    forces generic plans on every other statement."""
    first, _ = two_tenants
    seen = []
    async with db.read(first) as conn:
        # generic plans wherever PostgreSQL may use one: only the replanning can avoid them
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        for _ in range(8):
            await fetch(conn, REPLANNED, {"t": first}, replan=True)
            await fetch(conn, "SELECT count(*) FROM chunks WHERE tenant_id = :t", {"t": first})
            seen += await conn.fetch(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            )
        await conn.execute("RESET plan_cache_mode")
    replanned = [p for p in seen if p["statement"] == REPLANNED.replace(":t", "$1")]
    plain = [
        p for p in seen if p["statement"] == "SELECT count(*) FROM chunks WHERE tenant_id = $1"
    ]
    assert replanned[-1]["generic_plans"] == 0 and replanned[-1]["custom_plans"] == 8
    assert plain[-1]["generic_plans"] == 8


async def test_custom_plan_sessions_plan_every_statement(db, two_tenants):
    first, _ = two_tenants
    async with db.read(first, custom_plans=True) as conn:
        assert conn.custom_plans
        assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
        for _ in range(7):
            await fetch(conn, "SELECT count(*) FROM chunks WHERE tenant_id = :t", {"t": first})
        plans = await conn.fetchrow(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
            "WHERE statement = 'SELECT count(*) FROM chunks WHERE tenant_id = $1'"
        )
    assert tuple(plans) == (0, 7)
    async with db.read(first) as conn:
        assert not conn.custom_plans
        assert await conn.fetchval("SHOW plan_cache_mode") == "auto"
