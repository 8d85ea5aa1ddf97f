"""A large tenant's own HNSW index on a seeded table: the vector stage takes it once it is valid
(never while it is invalid), the plan really walks it (EXPLAIN, and index scan counts after many
executions of the prepared statement), results match exact search, RLS still holds, erasing the
tenant drops it, and ``knowmind tenant-index`` builds, lists and drops it."""

from __future__ import annotations

import uuid
from uuid import UUID

import pytest
from sqlalchemy import text

from knowmind import cli
from knowmind.db.engine import Database
from knowmind.services.tenant_index import TenantIndexService
from knowmind.store.search import MemoryFilters
from knowmind.store.tenant_index import (
    TENANT_EF_CONSTRUCTION,
    TENANT_M,
    list_tenant_indexes,
    tenant_index_name,
)
from knowmind.store.vector_search import (
    choose_vector_path,
    explain_vector_search,
    vector_candidates,
)
from tests.conftest import ADMIN_HEADERS, make_tenant
from tests.test_vector_search import _query, _seed, _time_and_type

ROWS, THRESHOLD = 300, 100


@pytest.fixture(scope="module")
async def pair(client, db) -> tuple[UUID, UUID]:
    """Two tenants above THRESHOLD rows; the first has its own index."""
    indexed, plain = await make_tenant(client), await make_tenant(client)
    await _seed(db, indexed.id, ROWS, seed=31)
    await _seed(db, plain.id, ROWS, seed=32)
    result = await TenantIndexService(db).build(UUID(indexed.id))
    assert result.built
    yield UUID(indexed.id), UUID(plain.id)
    for tenant in (indexed.id, plain.id):
        await TenantIndexService(db).drop(UUID(tenant))


async def _path(db: Database, tenant: UUID, exact_max_rows: int = THRESHOLD) -> str:
    async with db.tenant_tx(tenant) as conn:
        return await choose_vector_path(conn, tenant, exact_max_rows)


async def test_the_indexed_tenant_takes_its_own_index(db, pair):
    indexed, plain = pair
    assert await _path(db, indexed) == "tenant-hnsw-halfvec"
    assert await _path(db, indexed, ROWS) == "exact"  # small enough: exact still wins
    assert await _path(db, plain) == "hnsw"
    async with db.owner_tx() as conn:
        definition = await conn.scalar(
            text("SELECT indexdef FROM pg_indexes WHERE indexname = :name"),
            {"name": tenant_index_name(indexed)},
        )
    assert "((embedding)::halfvec(384)) halfvec_cosine_ops" in definition, definition
    assert f"m='{TENANT_M}', ef_construction='{TENANT_EF_CONSTRUCTION}'" in definition, definition
    async with db.tenant_tx(indexed) as conn:
        plan = await explain_vector_search(
            conn, indexed, _query(40), _time_and_type(), 10, "tenant-hnsw-halfvec"
        )
    assert f"Index Scan using {tenant_index_name(indexed)}" in plan, plan
    assert "Seq Scan" not in plan, plan
    async with db.tenant_tx(plain) as conn:
        plan = await explain_vector_search(conn, plain, _query(41), MemoryFilters(), 10, "hnsw")
    assert "Index Scan using chunks_embedding on chunks" in plan, plan


async def test_capabilities_count_the_tenant_indexes(client, pair):
    caps = (await client.get("/v1/capabilities")).json()
    assert caps["vector"]["tenant_indexes"] >= 1  # the pair's (other tests may hold more)


async def _scans(conn, name: str) -> int:
    return int(
        await conn.scalar(text("SELECT pg_stat_get_xact_numscans(to_regclass(:n))"), {"n": name})
    )


@pytest.mark.parametrize("session_mode", ["auto", "force_generic_plan"])
async def test_repeated_prepared_statements_keep_walking_the_tenant_index(db, pair, session_mode):
    """asyncpg prepares the statement once per connection; a generic plan cannot use a partial
    index. Whatever the session's plan_cache_mode, every execution must walk the tenant's index."""
    indexed, _ = pair
    name = tenant_index_name(indexed)
    async with db.tenant_tx(indexed) as conn:
        await conn.execute(
            text("SELECT set_config('plan_cache_mode', :mode, true)"), {"mode": session_mode}
        )
        before = await _scans(conn, name)
        for seed in range(8):
            rows = await vector_candidates(
                conn, indexed, _query(50 + seed), MemoryFilters(), 10, path="tenant-hnsw-halfvec"
            )
            assert len(rows) == 10
        assert await _scans(conn, name) - before == 8


_NEAREST_SETTINGS = (
    "SELECT name, setting FROM pg_settings WHERE name IN"
    " ('enable_sort', 'enable_seqscan', 'hnsw.ef_search', 'hnsw.iterative_scan', 'plan_cache_mode')"
)


async def test_a_nearest_session_walks_the_index_with_no_transaction_of_its_own(db, pair):
    indexed, _ = pair
    name = tenant_index_name(indexed)
    async with db.read(indexed, nearest=True) as conn:
        plan = await explain_vector_search(
            conn, indexed, _query(95), _time_and_type(), 10, "tenant-hnsw-halfvec"
        )
        assert not conn.is_in_transaction()
        session = dict(await conn.fetch(_NEAREST_SETTINGS))
        found = await vector_candidates(
            conn,
            indexed,
            _query(96),
            MemoryFilters(),
            10,
            path="tenant-hnsw-halfvec",
            ef_search=120,
        )
        ef_after = await conn.fetchval("SHOW hnsw.ef_search")
        # selective filters: the planner may filter first, in a transaction of the statement's
        await vector_candidates(
            conn, indexed, _query(97), MemoryFilters(tags=["x"]), 10, path="tenant-hnsw-halfvec"
        )
        assert await conn.fetchval("SHOW enable_sort") == "off"  # the SET LOCAL ended with it
    assert f"Index Scan using {name}" in plan, plan
    assert session == {
        "enable_sort": "off",
        "enable_seqscan": "off",
        "hnsw.ef_search": "100",  # explain's
        "hnsw.iterative_scan": "relaxed_order",
        "plan_cache_mode": "force_custom_plan",
    }
    assert ef_after == "120"
    async with db.tenant_tx(indexed) as conn:
        exact = await vector_candidates(
            conn, indexed, _query(96), MemoryFilters(), 10, path="exact"
        )
    assert [c for c, *_ in found] == [c for c, *_ in exact]


async def test_tenant_index_finds_what_exact_search_finds(db, pair):
    indexed, _ = pair
    for seed in range(60, 70):
        query = _query(seed)
        async with db.tenant_tx(indexed) as conn:
            exact = await vector_candidates(conn, indexed, query, MemoryFilters(), 10, path="exact")
            own = await vector_candidates(
                conn, indexed, query, MemoryFilters(), 10, path="tenant-hnsw-halfvec"
            )
        assert [c for c, *_ in own] == [c for c, *_ in exact]
        # the walk orders by the halfvec cast; the similarities are the full-precision ones
        assert [s for *_, s in own] == pytest.approx([s for *_, s in exact], abs=1e-6)


async def test_row_level_security_holds_on_the_tenant_index(db, pair):
    indexed, plain = pair
    # the plain tenant's transaction asks for the indexed tenant's rows: RLS returns none
    async with db.tenant_tx(plain) as conn:
        assert (
            await vector_candidates(
                conn, indexed, _query(70), MemoryFilters(), 10, path="tenant-hnsw-halfvec"
            )
            == []
        )
    async with db.tenant_tx(indexed) as conn:
        rows = await vector_candidates(
            conn, indexed, _query(71), MemoryFilters(), 50, path="tenant-hnsw-halfvec"
        )
    async with db.owner_tx() as conn:
        owners = await conn.scalar(
            text("SELECT array_agg(DISTINCT tenant_id) FROM chunks WHERE id = ANY(:ids)"),
            {"ids": [c for c, *_ in rows]},
        )
    assert owners == [indexed] and len(rows) == 50


async def test_an_invalid_index_is_never_taken_and_a_build_replaces_it(db, pair):
    indexed, _ = pair
    name = tenant_index_name(indexed)
    async with db.owner_tx() as conn:  # what an interrupted CREATE INDEX CONCURRENTLY leaves
        await conn.execute(
            text("UPDATE pg_index SET indisvalid = false WHERE indexrelid = to_regclass(:n)"),
            {"n": name},
        )
    try:
        assert await _path(db, indexed) == "hnsw"
        async with db.tenant_tx(indexed) as conn:
            plan = await explain_vector_search(
                conn, indexed, _query(80), MemoryFilters(), 10, "hnsw"
            )
        assert "Index Scan using chunks_embedding on chunks" in plan, plan
        async with db.owner_tx() as conn:
            listed = {i.tenant_id: i.valid for i in await list_tenant_indexes(conn)}
        assert listed[indexed] is False
    finally:
        rebuilt = await TenantIndexService(db).build(indexed)
    assert rebuilt.built
    assert await _path(db, indexed) == "tenant-hnsw-halfvec"


async def test_an_index_on_the_column_from_an_earlier_version_is_still_walked(client, db):
    """Earlier versions built the tenant index on the vector column itself: the stage must
    order by the column for it (ordering by the halfvec cast would sort every row)."""
    tenant = await make_tenant(client)
    await _seed(db, tenant.id, ROWS, seed=34)
    tenant_id, name = UUID(tenant.id), tenant_index_name(UUID(tenant.id))
    async with db.owner_tx() as conn:
        await conn.execute(
            text(
                f"CREATE INDEX {name} ON chunks USING hnsw (embedding vector_cosine_ops)"
                f" WITH (ef_construction = 128) WHERE tenant_id = '{tenant_id}'::uuid"
            )
        )
    try:
        assert await _path(db, tenant_id) == "tenant-hnsw"
        async with db.tenant_tx(tenant_id) as conn:
            plan = await explain_vector_search(
                conn, tenant_id, _query(90), MemoryFilters(), 10, "tenant-hnsw"
            )
            exact = await vector_candidates(
                conn, tenant_id, _query(91), MemoryFilters(), 10, path="exact"
            )
            own = await vector_candidates(
                conn, tenant_id, _query(91), MemoryFilters(), 10, path="tenant-hnsw"
            )
        assert f"Index Scan using {name}" in plan, plan
        assert [c for c, *_ in own] == [c for c, *_ in exact]
        async with db.owner_tx() as conn:
            listed = {i.tenant_id: i for i in await list_tenant_indexes(conn)}
        assert not listed[tenant_id].on_halfvec_cast and listed[tenant_id].valid
    finally:
        assert await TenantIndexService(db).drop(tenant_id)


async def test_erasing_a_tenant_drops_its_index(client, db):
    tenant = await make_tenant(client)
    await _seed(db, tenant.id, 30, seed=33)
    assert (await TenantIndexService(db).build(UUID(tenant.id))).built
    receipt = await client.delete(f"/v1/admin/tenants/{tenant.id}", headers=ADMIN_HEADERS)
    assert receipt.status_code == 200, receipt.text
    assert receipt.json()["erased"]["vector_indexes"] == 1
    async with db.owner_tx() as conn:
        name = tenant_index_name(UUID(tenant.id))
        assert await conn.scalar(text("SELECT to_regclass(:n)"), {"n": name}) is None


def _cli(capsys, *args: str) -> tuple[int, str]:
    code = cli.main(["tenant-index", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_cli_builds_lists_drops_and_builds_for_large_tenants(settings, pair, monkeypatch, capsys):
    monkeypatch.setenv("KNOWMIND_DATABASE_URL", settings.database.database_url)
    monkeypatch.setattr(cli, "configure_logging", lambda *_: None)
    indexed, plain = pair
    name = tenant_index_name(plain)
    code, out = _cli(capsys, "--tenant", str(plain))
    assert code == 0 and "built in" in out, out
    code, out = _cli(capsys)
    assert f"tenant {plain}: {name} valid, halfvec cast" in out and f"tenant {indexed}:" in out
    code, out = _cli(capsys, "--tenant", str(plain), "--drop")
    assert code == 0 and "index dropped" in out, out
    assert name not in _cli(capsys)[1]
    code, out = _cli(capsys, "--tenant", f"no-such-{uuid.uuid4().hex[:6]}")
    assert code == 1 and "not found" in out, out
    assert _cli(capsys, "--drop")[0] == 1

    monkeypatch.setenv("KNOWMIND_VECTOR_TENANT_INDEX_MIN_ROWS", str(ROWS))
    code, out = _cli(capsys, "--auto")
    assert code == 0, out
    assert f"tenant {plain}: built in" in out and f"tenant {indexed}: had a valid" in out, out
    monkeypatch.setenv("KNOWMIND_VECTOR_TENANT_INDEX_MIN_ROWS", "0")
    assert "no tenant indexes built" in _cli(capsys, "--auto")[1]
    # leave no index behind for other tests (the pair fixture drops both at the end)
    for line in out.splitlines():
        tenant = line.split()[1].rstrip(":") if line.startswith("tenant ") else None
        if tenant and UUID(tenant) not in pair:
            assert _cli(capsys, "--tenant", tenant, "--drop")[0] == 0
