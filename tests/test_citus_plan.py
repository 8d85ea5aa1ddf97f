"""The Citus plan read from the migrated schema: no blockers, every table covered (a migration
adding an uncovered table or a blocking key fails here), blockers found in a throwaway schema,
the CLI's DDL in foreign-key order, and ``--apply`` refused where Citus is not installed."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator

import pytest
from sqlalchemy import text

from knowmind import cli
from knowmind.db.citus import LOCAL_TABLES, REFERENCE_TABLES, build_plan, plan_for
from knowmind.db.citus_catalog import read_catalog
from knowmind.db.engine import Database
from knowmind.store.erasure import TENANT_TABLES


async def _cli(monkeypatch: pytest.MonkeyPatch, url: str, *args: str) -> int:
    """``knowmind citus …`` as the shell runs it (its own event loop, here on a thread)."""
    monkeypatch.setenv("KNOWMIND_DATABASE_URL", url)
    monkeypatch.setattr(cli, "configure_logging", lambda *_: None)
    return await asyncio.to_thread(cli.main, ["citus", *args])


CREATE_DISTRIBUTED = re.compile(r"create_distributed_table\('([^']+)', 'tenant_id'")


async def _tables_with(db: Database, schema: str = "public") -> tuple[set[str], set[str]]:
    """(all base tables, those with a tenant_id column), from information_schema."""
    async with db.owner_tx() as conn:
        tables = set(
            (
                await conn.execute(
                    text(
                        "SELECT table_name FROM information_schema.tables "
                        "WHERE table_schema = :s AND table_type = 'BASE TABLE'"
                    ),
                    {"s": schema},
                )
            ).scalars()
        )
        tenant = set(
            (
                await conn.execute(
                    text(
                        "SELECT table_name FROM information_schema.columns "
                        "WHERE table_schema = :s AND column_name = 'tenant_id'"
                    ),
                    {"s": schema},
                )
            ).scalars()
        )
    return tables, tenant & tables


async def test_migrated_schema_has_no_blockers_and_every_table_is_covered(
    database_url: str, db: Database
) -> None:
    plan = await plan_for(database_url)
    assert plan.blockers == [], "\n".join(map(str, plan.blockers))
    tables, tenant_tables = await _tables_with(db)
    kinds = {t.name: t.kind for t in plan.tables}
    assert set(kinds) == tables  # nothing left out, nothing invented
    for table in tenant_tables:
        assert kinds[table] == "distributed" or table in REFERENCE_TABLES | LOCAL_TABLES, table
    for table in tables - tenant_tables:
        assert kinds[table] in ("reference", "local"), table
    # what erasure treats as tenant data is what Citus keeps per tenant
    assert set(TENANT_TABLES) <= {n for n, k in kinds.items() if k == "distributed"}
    assert kinds["tenants"] == "reference"
    assert kinds["audit_log"] == "reference"  # nullable tenant_id: server-admin entries
    by_function = {f.signature.split("(")[0]: f.distribution_arg for f in plan.functions}
    assert by_function["knowmind_similar_names"] == "p_tenant"
    assert by_function["knowmind_current_tenant"] is None


@pytest.fixture
async def bad_schema(db: Database) -> AsyncIterator[str]:
    """A throwaway schema of tables Citus would refuse (dropped afterwards)."""
    schema = f"citus_check_{uuid.uuid4().hex[:8]}"
    statements = [
        f"CREATE SCHEMA {schema}",
        f"SET LOCAL search_path = {schema}, public",
        # fine: keys lead with or include tenant_id
        "CREATE TABLE parent (tenant_id uuid NOT NULL, id uuid NOT NULL, "
        "PRIMARY KEY (id, tenant_id))",
        "CREATE TABLE good_child (tenant_id uuid NOT NULL, parent_id uuid NOT NULL, "
        "CONSTRAINT good_child_parent_fk FOREIGN KEY (parent_id, tenant_id) "
        "REFERENCES parent (id, tenant_id) ON DELETE CASCADE)",
        # a UNIQUE without tenant_id, and one with tenant_id only as an INCLUDE column
        "CREATE TABLE profiles (tenant_id uuid NOT NULL, id uuid NOT NULL, email text, "
        "handle text, PRIMARY KEY (tenant_id, id), CONSTRAINT profiles_email_key UNIQUE (email))",
        "CREATE UNIQUE INDEX profiles_handle_idx ON profiles (handle) INCLUDE (tenant_id)",
        # an FK between tenant tables without tenant_id (its target key lacks it too)
        "ALTER TABLE parent ADD CONSTRAINT parent_id_key UNIQUE (id)",
        "CREATE TABLE orphan_child (tenant_id uuid NOT NULL, parent_id uuid, "
        "CONSTRAINT orphan_child_parent_fk FOREIGN KEY (parent_id) REFERENCES parent (id))",
        # tenant_id in both keys, but not at the same position
        "CREATE TABLE twisted_child (tenant_id uuid NOT NULL, parent_id uuid NOT NULL, "
        "CONSTRAINT twisted_child_parent_fk FOREIGN KEY (tenant_id, parent_id) "
        "REFERENCES parent (id, tenant_id))",
        # nullable tenant_id
        "CREATE TABLE loose (tenant_id uuid, id uuid NOT NULL, PRIMARY KEY (id))",
        # exclusion constraint without tenant_id
        "CREATE TABLE bookings (tenant_id uuid NOT NULL, during tstzrange NOT NULL, "
        "CONSTRAINT bookings_no_overlap EXCLUDE USING gist (during WITH &&))",
        "CREATE TABLE rooms (tenant_id uuid NOT NULL, during tstzrange NOT NULL, "
        "CONSTRAINT rooms_no_overlap EXCLUDE USING gist (tenant_id WITH =, during WITH &&))",
        # a reference table (by name) pointing at a distributed one
        "CREATE TABLE tenants (id uuid PRIMARY KEY, parent_id uuid NOT NULL, "
        "parent_tenant uuid NOT NULL, CONSTRAINT tenants_parent_fk "
        "FOREIGN KEY (parent_tenant, parent_id) REFERENCES parent (tenant_id, id))",
        # a shared table nobody classified
        "CREATE TABLE settings_cache (key text PRIMARY KEY, value text)",
    ]
    async with db.owner_tx() as conn:
        for statement in statements:
            await conn.execute(text(statement))
    try:
        yield schema
    finally:
        async with db.owner_tx() as conn:
            await conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))


async def test_blockers_name_the_table_and_constraint(database_url: str, bad_schema: str) -> None:
    plan = await plan_for(database_url, bad_schema)
    found = {(b.table, b.what) for b in plan.blockers}
    expected = {
        ("profiles", "profiles_email_key"),
        ("profiles", "profiles_handle_idx"),
        ("parent", "parent_id_key"),
        ("orphan_child", "foreign key orphan_child_parent_fk"),
        ("twisted_child", "foreign key twisted_child_parent_fk"),
        ("loose", "column tenant_id"),
        ("loose", "loose_pkey"),
        ("bookings", "bookings_no_overlap"),
        ("tenants", "foreign key tenants_parent_fk"),
        ("settings_cache", "table"),
    }
    assert found == expected, "\n".join(map(str, plan.blockers))
    reasons = {(b.table, b.what): b.reason for b in plan.blockers}
    assert "nullable" in reasons[("loose", "column tenant_id")]
    assert "same position" in reasons[("orphan_child", "foreign key orphan_child_parent_fk")]
    assert "reference table" in reasons[("tenants", "foreign key tenants_parent_fk")]
    assert "REFERENCE_TABLES" in reasons[("settings_cache", "table")]


async def test_cli_refuses_a_plan_with_blockers(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    bad_schema: str,
) -> None:
    assert await _cli(monkeypatch, database_url, "plan", "--schema", bad_schema) == 1
    out, err = capsys.readouterr()
    assert out == ""  # no DDL while anything blocks
    assert "profiles: profiles_email_key: unique key without tenant_id" in err
    assert "loose: column tenant_id: is nullable" in err


async def test_cli_plan_distributes_every_tenant_table_in_foreign_key_order(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    db: Database,
) -> None:
    assert await _cli(monkeypatch, database_url, "plan") == 0
    ddl = capsys.readouterr().out
    distributed = CREATE_DISTRIBUTED.findall(ddl)
    _, tenant_tables = await _tables_with(db)
    assert set(distributed) == tenant_tables - set(REFERENCE_TABLES) - set(LOCAL_TABLES)
    assert ddl.index("CREATE EXTENSION IF NOT EXISTS citus") < ddl.index("create_reference")
    assert ddl.index("create_reference_table('tenants')") < ddl.index("create_distributed_table")
    anchor = distributed[0]
    assert f"create_distributed_table('{anchor}', 'tenant_id', colocate_with => 'none')" in ddl
    for table in distributed[1:]:
        assert f"'{table}', 'tenant_id', colocate_with => '{anchor}')" in ddl
    # every foreign key between distributed tables: the referenced table comes first
    async with db.owner_tx() as conn:
        pairs = (
            await conn.execute(
                text(
                    "SELECT src.relname, dst.relname FROM pg_constraint c "
                    "JOIN pg_class src ON src.oid = c.conrelid "
                    "JOIN pg_class dst ON dst.oid = c.confrelid "
                    "WHERE c.contype = 'f' AND src.relnamespace = 'public'::regnamespace"
                )
            )
        ).all()
    checked = 0
    for source, target in pairs:
        if source in distributed and target in distributed and source != target:
            assert distributed.index(target) < distributed.index(source), (source, target)
            checked += 1
    assert checked >= 5  # chunks → memories, mentions → entities, ...
    assert re.search(
        r"create_distributed_function\('knowmind_similar_names\(uuid,text\[\],integer\)', "
        rf"'p_tenant', colocate_with => '{anchor}'\)",
        ddl,
    )


async def test_apply_without_citus_fails_clearly_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    db: Database,
) -> None:
    assert await _cli(monkeypatch, database_url, "plan", "--apply") == 2
    err = capsys.readouterr().err
    assert "the citus extension is not available on this server" in err
    async with db.owner_tx() as conn:
        installed = await conn.scalar(
            text("SELECT count(*) FROM pg_extension WHERE extname = 'citus'")
        )
    assert installed == 0


async def test_a_rerun_after_a_new_migration_adds_only_the_new_table(
    database_url: str, db: Database
) -> None:
    """On a Citus cluster the plan skips tables Citus already manages and co-locates a new
    tenant table with them (Citus' metadata is faked here from the plan's own catalog rows)."""
    async with db.owner_tx() as conn:
        catalog = await read_catalog(conn, "public", "tenant_id")
    first = build_plan("public", catalog)
    anchor = first.anchor
    done = [{"name": t.name, "kind": t.kind} for t in first.tables if t.name != "summary_nodes"]
    rerun = build_plan("public", {**catalog, "citus": done})
    statements = rerun.table_statements()
    assert statements == [
        f"SELECT create_distributed_table('summary_nodes', 'tenant_id', colocate_with => "
        f"'{anchor}')"
    ]
    assert rerun.anchor == anchor
