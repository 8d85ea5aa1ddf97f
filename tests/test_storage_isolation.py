"""Row-level security, checked as the app role on the real database: tenant isolation must hold
in storage, even for SQL that forgets its tenant predicate."""

from __future__ import annotations

import hashlib
import uuid

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from knowmind.db.engine import APP_ROLE
from knowmind.db.tenant_scope import UserScope
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


# -- end users inside a tenant (migration 0021) ---------------------------------------------

USER_TABLES = ("memories", "chunks")


async def insert_user_memory(conn, tenant_id: uuid.UUID, content: str, user: str | None):
    """A memory of ``user`` (None: shared) and one chunk of it, as the session may."""
    memory = await conn.scalar(
        text(
            "INSERT INTO memories (tenant_id, content, content_sha256, user_id) "
            "VALUES (:t, :c, :sha, :u) RETURNING id"
        ),
        {"t": tenant_id, "c": content, "sha": hashlib.sha256(content.encode()).digest(), "u": user},
    )
    await conn.execute(
        text(
            "INSERT INTO chunks (tenant_id, memory_id, ordinal, content, language, embedding) "
            "VALUES (:t, :m, 0, :c, 'german', array_fill(0.1, ARRAY[384])::vector)"
        ),
        {"t": tenant_id, "m": memory, "c": content},
    )
    return memory


@pytest.fixture
async def three_owners(db):
    """A tenant with a memory of alice, one of bob and a shared one (written tenant-wide)."""
    tenant = await new_tenant(db)
    async with db.tenant_tx(tenant) as conn:
        ids = {
            owner: await insert_user_memory(conn, tenant, f"Notiz von {owner}", owner)
            for owner in ("alice", "bob", None)
        }
    return tenant, ids


async def _as_app_role(db, tenant: uuid.UUID, user: str | None, sql: str) -> list:
    """``sql`` on a bare app-role connection with the two settings set by hand, as any
    session of the app role could."""
    async with db.app.connect() as conn:
        await conn.execute(
            text(
                "SELECT set_config('app.tenant_id', :t, true), set_config('app.user_id', :u, true)"
            ),
            {"t": str(tenant), "u": user or ""},
        )
        rows = list((await conn.execute(text(sql))).all())
        await conn.rollback()
    return rows


async def test_every_user_table_has_restrictive_user_policies(db):
    async with db.owner_tx() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT c.relname, CAST(p.polcmd AS text) AS polcmd, p.polpermissive "
                    "FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid "
                    "WHERE c.relname = ANY(:t) AND p.polname LIKE 'user_scope_%'"
                ),
                {"t": list(USER_TABLES)},
            )
        ).all()
    assert {(r.relname, r.polcmd) for r in rows} == {
        (t, cmd) for t in USER_TABLES for cmd in ("r", "a", "w", "d")
    }
    assert not any(r.polpermissive for r in rows)


async def test_a_user_sees_its_own_and_shared_rows_without_any_where(db, three_owners):
    tenant, ids = three_owners
    for user, visible in (
        ("alice", {ids["alice"], ids[None]}),
        ("bob", {ids["bob"], ids[None]}),
        ("mallory", {ids[None]}),
        (None, set(ids.values())),  # a tenant-wide session
    ):
        for table, column in (("memories", "id"), ("chunks", "memory_id")):
            rows = await _as_app_role(db, tenant, user, f"SELECT {column} FROM {table}")
            assert {r[0] for r in rows} == visible, (user, table)
        # the leaks to look for: another user's content, counted or aggregated
        counted = await _as_app_role(
            db,
            tenant,
            user,
            "SELECT count(*) FILTER (WHERE content LIKE '%bob%'), "
            "count(*) FILTER (WHERE user_id IS NOT NULL AND user_id <> "
            "coalesce(nullif(current_setting('app.user_id'), ''), user_id)) FROM chunks",
        )
        leaked_bob, leaked_other = counted[0]
        assert leaked_other == 0, user
        assert leaked_bob == (1 if user in ("bob", None) else 0), user


async def test_a_user_session_cannot_write_change_or_delete_what_it_does_not_own(db, three_owners):
    tenant, ids = three_owners
    alice = UserScope(tenant, "alice")
    async with db.tenant_tx(alice) as conn:
        for table, column in (("memories", "id"), ("chunks", "memory_id")):
            for owner in ("bob", None):
                changed = await conn.execute(
                    text(f"UPDATE {table} SET content = 'gestohlen' WHERE {column} = :m"),
                    {"m": ids[owner]},
                )
                assert changed.rowcount == 0, (table, owner)
                deleted = await conn.execute(
                    text(f"DELETE FROM {table} WHERE {column} = :m"), {"m": ids[owner]}
                )
                assert deleted.rowcount == 0, (table, owner)
        # its own: it may
        changed = await conn.execute(
            text("UPDATE memories SET title = 'meins' WHERE id = :m"), {"m": ids["alice"]}
        )
        assert changed.rowcount == 1
    for statement in (
        "UPDATE memories SET user_id = 'bob' WHERE id = :m",  # giving one away
        "UPDATE memories SET user_id = NULL WHERE id = :m",  # sharing one
    ):
        with pytest.raises(DBAPIError, match="row-level security"):
            async with db.tenant_tx(alice) as conn:
                await conn.execute(text(statement), {"m": ids["alice"]})
    for owner in ("bob", None):
        with pytest.raises(DBAPIError, match="row-level security"):
            async with db.tenant_tx(alice) as conn:
                await insert_user_memory(conn, tenant, f"untergeschoben {owner}", owner)
    async with db.tenant_tx(tenant) as conn:  # nothing changed for anyone else
        rows = (
            await conn.execute(
                text("SELECT content FROM memories WHERE id = ANY(:ids) ORDER BY content"),
                {"ids": [ids["bob"], ids[None]]},
            )
        ).scalars()
        assert list(rows) == ["Notiz von None", "Notiz von bob"]


async def test_a_chunk_always_belongs_to_its_memorys_user(db, three_owners):
    tenant, ids = three_owners
    async with db.tenant_tx(tenant) as conn:  # tenant-wide: it may write any user's rows
        await conn.execute(
            text("UPDATE chunks SET user_id = NULL WHERE memory_id = :m"), {"m": ids["bob"]}
        )
        owner = await conn.scalar(
            text("SELECT user_id FROM chunks WHERE memory_id = :m"), {"m": ids["bob"]}
        )
    assert owner == "bob"  # the trigger set it back: it follows the memory


async def test_the_web_search_function_answers_rows_a_user_then_cannot_read(db, three_owners):
    """The owner-run full-text look-up (0013) answers chunk ids of the whole tenant; the
    statements that use it join chunks, so a user's session still reads only its own."""
    tenant, ids = three_owners
    async with db.tenant_tx(UserScope(tenant, "alice")) as conn:
        found = (
            await conn.execute(
                text(
                    "SELECT c.memory_id FROM knowmind_websearch_chunks(:t, 'german', 'Notiz') w "
                    "JOIN chunks c ON c.tenant_id = :t AND c.id = w.id"
                ),
                {"t": tenant},
            )
        ).scalars()
        assert set(found) == {ids["alice"], ids[None]}
