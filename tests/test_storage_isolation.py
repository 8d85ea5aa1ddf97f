"""Row-level security, checked as the app role on the real database: tenant isolation must hold
in storage, even for SQL that forgets its tenant predicate."""

from __future__ import annotations

import hashlib
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from knowmind.db.engine import APP_ROLE
from knowmind.store import entities as entity_store
from knowmind.store import tenants as tenant_store
from knowmind.store.entities import NewEntity

TENANT_TABLES = (
    "memories",
    "chunks",
    "api_tokens",
    "chunk_terms",
    "bm25_lexemes",
    "bm25_corpus",
    "conversations",
    "conversation_turns",
)


async def new_tenant(db) -> uuid.UUID:
    async with db.owner_tx() as conn:
        row = await tenant_store.create_tenant(
            conn, f"rls-{uuid.uuid4().hex[:8]}", "german", "test-model", 384
        )
    return row.id


async def insert_memory(conn, tenant_id: uuid.UUID, content: str) -> uuid.UUID:
    return await conn.scalar(
        text(
            "INSERT INTO memories (tenant_id, content, content_sha256) "
            "VALUES (:t, :c, :sha) RETURNING id"
        ),
        {"t": tenant_id, "c": content, "sha": hashlib.sha256(content.encode()).digest()},
    )


@pytest.fixture
async def two_tenants(db):
    a, b = await new_tenant(db), await new_tenant(db)
    async with db.tenant_tx(a) as conn:
        memory = await insert_memory(conn, a, "Geheimnis von Mandant A")
    return a, b, memory


async def test_app_role_is_not_privileged(db):
    async with db.app.connect() as conn:
        row = (
            await conn.execute(
                text(
                    "SELECT current_user, rolsuper, rolbypassrls FROM pg_roles "
                    "WHERE rolname = current_user"
                )
            )
        ).one()
        owners = (
            await conn.execute(
                text("SELECT DISTINCT tableowner FROM pg_tables WHERE tablename = ANY(:t)"),
                {"t": list(TENANT_TABLES)},
            )
        ).scalars()
        owner_names = set(owners)
    assert row.current_user == APP_ROLE
    assert row.rolsuper is False and row.rolbypassrls is False
    assert APP_ROLE not in owner_names


async def test_every_tenant_table_has_row_level_security(db):
    async with db.owner_tx() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT c.relname, c.relrowsecurity, count(p.polname) AS policies "
                    "FROM pg_class c LEFT JOIN pg_policy p ON p.polrelid = c.oid "
                    "WHERE c.relname = ANY(:t) GROUP BY c.relname, c.relrowsecurity"
                ),
                {"t": [*TENANT_TABLES, "tenants"]},
            )
        ).all()
    assert {r.relname: (r.relrowsecurity, r.policies >= 1) for r in rows} == {
        t: (True, True) for t in [*TENANT_TABLES, "tenants"]
    }


async def test_tenant_sees_only_its_own_rows_without_any_where(db, two_tenants):
    a, b, memory = two_tenants
    async with db.tenant_tx(a) as conn:
        assert (
            await conn.scalar(text("SELECT count(*) FROM memories WHERE id = :m"), {"m": memory})
            == 1
        )
        assert await conn.scalar(text("SELECT count(*) FROM tenants")) == 1
    async with db.tenant_tx(b) as conn:
        assert (
            await conn.scalar(text("SELECT count(*) FROM memories WHERE id = :m"), {"m": memory})
            == 0
        )
        assert await conn.scalar(text("SELECT count(*) FROM tenants WHERE id = :a"), {"a": a}) == 0
        updated = await conn.execute(
            text("UPDATE memories SET content = 'gestohlen' WHERE id = :m"), {"m": memory}
        )
        assert updated.rowcount == 0
        deleted = await conn.execute(text("DELETE FROM memories WHERE id = :m"), {"m": memory})
        assert deleted.rowcount == 0
    async with db.tenant_tx(a) as conn:
        content = await conn.scalar(
            text("SELECT content FROM memories WHERE id = :m"), {"m": memory}
        )
    assert content == "Geheimnis von Mandant A"


async def test_tenant_cannot_write_rows_of_another_tenant(db, two_tenants):
    a, b, _ = two_tenants
    with pytest.raises(DBAPIError, match="row-level security"):
        async with db.tenant_tx(b) as conn:
            await insert_memory(conn, a, "untergeschoben")
    with pytest.raises(DBAPIError, match="row-level security"):
        async with db.tenant_tx(a) as conn:
            await conn.execute(text("UPDATE memories SET tenant_id = :b"), {"b": b})


async def test_no_tenant_context_sees_nothing(db, two_tenants):
    async with db.app_tx() as conn:
        for table in ("memories", "chunks"):  # api_tokens is not readable at all (below)
            assert await conn.scalar(text(f"SELECT count(*) FROM {table}")) == 0, table
        assert await conn.scalar(text("SELECT count(*) FROM tenants")) == 0


async def test_app_role_cannot_read_token_hashes(db, two_tenants):
    a, _, _ = two_tenants
    async with db.tenant_tx(a) as conn:
        with pytest.raises(DBAPIError, match="permission denied"):
            await conn.execute(text("SELECT token_hash FROM api_tokens"))


async def test_trigram_lookup_functions_answer_for_the_session_tenant_only(db, two_tenants):
    """The owner-run typo and fuzzy-name look-ups (migration 0006) bypass row-level security to
    use their index, so they must enforce it themselves: another tenant's id, or no tenant set,
    yields nothing."""
    a, b, _ = two_tenants
    async with db.tenant_tx(a) as conn:
        entity = NewEntity(
            name="Mandantenprojekt Adler",
            norm_name="mandantenprojekt adler",
            entity_class="project",
        )
        await entity_store.upsert_entity(conn, a, entity)
        await conn.execute(
            text("INSERT INTO bm25_lexemes (tenant_id, lexeme, df) VALUES (:t, 'geheimnis', 1)"),
            {"t": a},
        )
    lexemes = (
        "SELECT lexeme FROM knowmind_similar_lexemes(CAST(:t AS uuid), ARRAY['geheimnise'], 0.3, 5)"
    )
    names = "SELECT norm_name FROM knowmind_similar_names(CAST(:t AS uuid), ARRAY['adler'], 5)"
    async with db.tenant_tx(a) as conn:  # the owner sees its rows: the probes can fail
        assert (await conn.execute(text(lexemes), {"t": a})).scalars().all() == ["geheimnis"]
        found = (await conn.execute(text(names), {"t": a})).scalars().all()
        assert found == ["mandantenprojekt adler"]
    async with db.tenant_tx(b) as conn:
        for sql in (lexemes, names):
            assert (await conn.execute(text(sql), {"t": a})).all() == [], sql
            assert (await conn.execute(text(sql), {"t": b})).all() == [], sql
    async with db.app_tx() as conn:
        for sql in (lexemes, names):
            assert (await conn.execute(text(sql), {"t": a})).all() == [], sql
