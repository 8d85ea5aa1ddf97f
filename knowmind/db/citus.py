"""Citus distribution plan, read from the live catalog of a migrated database.

Every table with a ``tenant_id`` column is distributed by it, all in one co-location group (a
tenant's rows of every table live on one node, so every tenant-scoped statement is a
single-shard query); the few shared tables are reference tables (a copy on every node). The
judgement calls are the small mappings below; everything else (tables, keys, foreign keys,
functions) comes from ``pg_catalog``, so a new migration is covered without touching this file
unless it adds a shared table. The plan's blockers are what Citus would refuse
(``create_distributed_table`` and its foreign-key rules: unique keys and foreign keys must carry
the distribution column, no foreign key from a reference table to a distributed one, no NULL
distribution values, ...); ``knowmind citus plan`` prints or applies nothing while there are any.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.db.citus_catalog import read_catalog
from knowmind.db.engine import make_engine
from knowmind.db.migrate import SchemaError

__all__ = [
    "DISTRIBUTION_COLUMN",
    "LOCAL_TABLES",
    "REFERENCE_TABLES",
    "Blocker",
    "CitusPlan",
    "CitusUnavailableError",
    "TablePlan",
    "apply_plan",
    "build_plan",
    "citus_available",
    "plan_for",
    "read_plan",
]

DISTRIBUTION_COLUMN = "tenant_id"

# Shared tables: replicated to every node (writes are two-phase commits to all of them, so
# only small, rarely written tables belong here). Table → why.
REFERENCE_TABLES: dict[str, str] = {
    "tenants": (
        "one row per tenant, joined by token look-ups on every node; distributed by its id it "
        "could not keep UNIQUE (name), and every tenant table's foreign key to it is allowed "
        "from a distributed table to a reference table"
    ),
    "knowmind_meta": "schema facts (embedder, dimension) read on start",
    "alembic_version": "the schema revision; migrations run on the coordinator",
    "audit_log": (
        "tenant_id is NULL for server-admin entries (a distribution column cannot be NULL) and "
        "its key is a global identity; admin and erasure actions are rare writes"
    ),
}
# Tables kept on the coordinator only (no Citus metadata). Table → why. None today.
LOCAL_TABLES: dict[str, str] = {}

Kind = Literal["distributed", "reference", "local"]
# pg_constraint.confdeltype / confupdtype codes
_SET_NULL, _SET_DEFAULT, _CASCADE = "n", "d", "c"


class CitusUnavailableError(SchemaError):
    """The server has no citus extension to install."""


@dataclass(frozen=True, slots=True)
class Blocker:
    """Something Citus refuses: the table, the constraint or column, and why."""

    table: str
    what: str
    reason: str

    def __str__(self) -> str:
        return f"{self.table}: {self.what}: {self.reason}"


@dataclass(frozen=True, slots=True)
class TablePlan:
    name: str
    kind: Kind
    reason: str
    already: bool = False  # already a Citus table of this kind


@dataclass(frozen=True, slots=True)
class FunctionPlan:
    signature: str  # regprocedure text, e.g. knowmind_similar_names(uuid,text[],integer)
    distribution_arg: str | None


@dataclass(slots=True)
class CitusPlan:
    schema: str
    tables: list[TablePlan]
    functions: list[FunctionPlan]
    blockers: list[Blocker]
    notes: list[str] = field(default_factory=list)

    def of_kind(self, kind: Kind) -> list[TablePlan]:
        return [t for t in self.tables if t.kind == kind]

    @property
    def anchor(self) -> str | None:
        """The distributed table the others co-locate with: one already distributed, else the
        first in foreign-key order (it references no other distributed table)."""
        distributed = self.of_kind("distributed")
        candidates = [t for t in distributed if t.already] or distributed
        return candidates[0].name if candidates else None

    def table_statements(self) -> list[str]:
        """The create_*_table calls, reference tables first, then distributed tables in
        foreign-key order (referenced first); tables already distributed are skipped."""
        out = []
        for table in self.of_kind("reference"):
            if not table.already:
                out.append(f"SELECT create_reference_table({_literal(self._name(table.name))})")
        anchor = self.anchor
        for table in self.of_kind("distributed"):
            if table.already:
                continue
            group = "none" if table.name == anchor else self._name(anchor or "")
            out.append(
                f"SELECT create_distributed_table({_literal(self._name(table.name))}, "
                f"{_literal(DISTRIBUTION_COLUMN)}, colocate_with => {_literal(group)})"
            )
        return out

    def function_statements(self) -> list[str]:
        out = []
        for fn in self.functions:
            if fn.distribution_arg and self.anchor:
                out.append(
                    f"SELECT create_distributed_function({_literal(fn.signature)}, "
                    f"{_literal(fn.distribution_arg)}, "
                    f"colocate_with => {_literal(self._name(self.anchor))})"
                )
            else:
                out.append(f"SELECT create_distributed_function({_literal(fn.signature)})")
        return out

    def ddl(self) -> str:
        """The whole plan as a SQL script for the coordinator (psql -f)."""
        lines = [
            f"-- knowmind citus plan for schema {self.schema}: "
            f"{len(self.of_kind('distributed'))} distributed tables (co-located with "
            f"{self.anchor}), {len(self.of_kind('reference'))} reference tables, "
            f"{len(self.of_kind('local'))} local",
            "-- derived from the live catalog; run on the Citus coordinator as the schema owner",
            "CREATE EXTENSION IF NOT EXISTS citus;",
            "BEGIN;",
            *(f"{s};" for s in TRANSACTION_SETTINGS),
        ]
        reasons = {t.name: t.reason for t in self.tables}
        for statement in self.table_statements():
            name = statement.split("'")[1].split(".")[-1].strip('"')
            lines.append(f"-- {name}: {reasons.get(name, '')}")
            lines.append(statement + ";")
        lines.append("COMMIT;")
        lines.append("-- functions: on every node; those taking the tenant run where its shard is")
        lines.extend(s + ";" for s in self.function_statements())
        lines.extend(f"-- note: {note}" for note in self.notes)
        return "\n".join(lines) + "\n"

    def _name(self, table: str) -> str:
        return table if self.schema == "public" else f"{_ident(self.schema)}.{_ident(table)}"


# Distribute in one transaction over one connection per node (foreign keys between the new
# tables need it); tables with triggers need Citus' opt-in (see the notes).
TRANSACTION_SETTINGS = (
    "SET LOCAL citus.multi_shard_modify_mode TO 'sequential'",
    "SET LOCAL citus.enable_unsafe_triggers TO on",
)


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _ident(name: str) -> str:
    plain = name.isidentifier() and name == name.lower() and name.isascii()
    return name if plain else '"' + name.replace('"', '""') + '"'


async def read_plan(conn: AsyncConnection, schema: str = "public") -> CitusPlan:
    """Read the catalog of ``schema`` and build the plan with its blockers."""
    return build_plan(schema, await read_catalog(conn, schema, DISTRIBUTION_COLUMN))


Catalog = Mapping[str, Sequence[Any]]
Kinds = dict[str, Kind | None]
COL = DISTRIBUTION_COLUMN
# Why Citus refuses each case (create_distributed_table, and its foreign-key rules).
WHY = {
    "unclassified": f"has no {COL} and is not classified: add it to REFERENCE_TABLES or "
    "LOCAL_TABLES in knowmind/db/citus.py",
    "nullable": "is nullable: a distribution column cannot be NULL",
    "generated": "is generated: Citus cannot distribute by it",
    "types": "co-located tables need one distribution column type, found {}",
    "unique": f"unique key without {COL}: Citus enforces uniqueness within a shard only",
    "exclusion": f"exclusion constraint without {COL} WITH =",
    "identity": "identity column of type {}: distributed tables allow bigint ones only",
    "policy": "a policy of a Citus table may not contain a subquery",
    "not_citus": "references {}, which is neither a distributed nor a reference table",
    "ref_to_dist": "a reference table may not reference a distributed table ({})",
    "on_delete": f"ON DELETE SET NULL/SET DEFAULT on a key that includes {COL}",
    "on_update": f"ON UPDATE SET NULL/SET DEFAULT/CASCADE on a key that includes {COL}",
    "position": f"between distributed tables ({{}}) the key must hold {COL} on both sides "
    "at the same position",
    "cycle": "part of a foreign-key cycle",
}


def build_plan(schema: str, catalog: Catalog) -> CitusPlan:
    """The plan from catalog rows (pure: the rules live here, the SQL in citus_catalog)."""
    tables = {row["name"]: row for row in catalog["tables"]}
    kinds: Kinds = {}
    reasons: dict[str, str] = {}
    for name, row in tables.items():
        kinds[name], reasons[name] = _classify(name, row)
    citus = {row["name"]: row["kind"] for row in catalog["citus"]}
    blockers = _table_blockers(tables, kinds) + _key_blockers(catalog, tables, kinds)
    blockers += _foreign_key_blockers(catalog["foreign_keys"], schema, tables, kinds)
    blockers += [
        Blocker(r["table_name"], f"policy {r['name']}", WHY["policy"])
        for r in catalog["policies"]
        if kinds.get(r["table_name"]) in ("distributed", "reference")
    ]

    def of(kind: Kind) -> list[str]:
        return [n for n, k in kinds.items() if k == kind]

    order, cycle = _fk_order(of("distributed"), catalog["foreign_keys"])
    blockers += [Blocker(t, "foreign keys", WHY["cycle"]) for t in cycle]
    planned = [*_fk_order(of("reference"), catalog["foreign_keys"])[0], *order, *of("local")]
    return CitusPlan(
        schema=schema,
        tables=[_table(n, kinds[n], reasons[n], citus.get(n)) for n in planned],
        functions=_functions(catalog["functions"]),
        blockers=sorted(blockers, key=lambda b: (b.table, b.what)),
        notes=_notes(catalog, kinds),
    )


def _table(name: str, kind: Kind | None, reason: str, citus_kind: str | None) -> TablePlan:
    assert kind is not None
    return TablePlan(name, kind, reason, already=citus_kind == kind)


def _classify(name: str, row: Any) -> tuple[Kind | None, str]:
    if name in REFERENCE_TABLES:
        return "reference", REFERENCE_TABLES[name]
    if name in LOCAL_TABLES:
        return "local", LOCAL_TABLES[name]
    if row["tenant_attnum"] is not None:
        return "distributed", f"tenant data, by {COL}"
    return None, ""


def _table_blockers(tables: Mapping[str, Any], kinds: Kinds) -> list[Blocker]:
    out = []
    types = {tables[n]["tenant_type"] for n, k in kinds.items() if k == "distributed"}
    column = f"column {COL}"
    for name, kind in kinds.items():
        row = tables[name]
        if kind is None:
            out.append(Blocker(name, "table", WHY["unclassified"]))
        if kind != "distributed":
            continue
        if not row["tenant_not_null"]:
            out.append(Blocker(name, column, WHY["nullable"]))
        if row["tenant_generated"]:
            out.append(Blocker(name, column, WHY["generated"]))
        if len(types) > 1:
            out.append(Blocker(name, column, WHY["types"].format(", ".join(sorted(types)))))
    return out


def _key_blockers(catalog: Catalog, tables: Mapping[str, Any], kinds: Kinds) -> list[Blocker]:
    def tenant_att(table: str) -> int | None:
        distributed = kinds.get(table) == "distributed"
        return int(tables[table]["tenant_attnum"]) if distributed else None

    out = []
    for row in catalog["unique"]:
        att = tenant_att(row["table_name"])
        if att is not None and att not in list(row["keys"] or []):
            out.append(Blocker(row["table_name"], row["name"], WHY["unique"]))
    for row in catalog["exclusions"]:
        att = tenant_att(row["table_name"])
        keys, ops = list(row["keys"] or []), list(row["operators"] or [])
        if att is not None and (att not in keys or ops[keys.index(att)] != "="):
            out.append(Blocker(row["table_name"], row["name"], WHY["exclusion"]))
    for row in catalog["identity"]:
        if tenant_att(row["table_name"]) is not None and row["type"] != "bigint":
            why = WHY["identity"].format(row["type"])
            out.append(Blocker(row["table_name"], f"column {row['name']}", why))
    return out


def _foreign_key_blockers(
    foreign_keys: Sequence[Any], schema: str, tables: Mapping[str, Any], kinds: Kinds
) -> list[Blocker]:
    out = []
    for fk in foreign_keys:
        source, target, what = fk["source"], fk["target"], f"foreign key {fk['name']}"
        src = kinds.get(source)
        dst = kinds.get(target) if fk["target_schema"] == schema else None
        if src not in ("distributed", "reference"):
            continue
        if dst not in ("distributed", "reference"):
            where = f"{fk['target_schema']}.{target}"
            out.append(Blocker(source, what, WHY["not_citus"].format(where)))
        elif src == "reference" and dst == "distributed":
            out.append(Blocker(source, what, WHY["ref_to_dist"].format(target)))
        elif src == "distributed":
            out += [Blocker(source, what, why) for why in _distributed_fk(fk, tables, dst)]
    return out


def _distributed_fk(fk: Any, tables: Mapping[str, Any], target_kind: Kind | None) -> list[str]:
    """Why Citus refuses this foreign key of a distributed table (none: it accepts it)."""
    keys, target_keys = list(fk["keys"]), list(fk["target_keys"])
    att = int(tables[fk["source"]]["tenant_attnum"])
    why = []
    if att in keys and fk["on_delete"] in (_SET_NULL, _SET_DEFAULT):
        why.append(WHY["on_delete"])
    if att in keys and fk["on_update"] in (_SET_NULL, _SET_DEFAULT, _CASCADE):
        why.append(WHY["on_update"])
    if target_kind == "distributed":
        target_att = int(tables[fk["target"]]["tenant_attnum"])
        both = att in keys and target_att in target_keys
        if not both or keys.index(att) != target_keys.index(target_att):
            why.append(WHY["position"].format(f"{fk['source']} → {fk['target']}"))
    return why


def _fk_order(names: list[str], foreign_keys: Sequence[Any]) -> tuple[list[str], list[str]]:
    """``names`` with every referenced table before the tables referencing it (by name among
    equals), and the tables left in a cycle."""
    wanted = set(names)
    needs: dict[str, set[str]] = {n: set() for n in names}
    for fk in foreign_keys:
        if fk["source"] in wanted and fk["target"] in wanted and fk["source"] != fk["target"]:
            needs[fk["source"]].add(fk["target"])
    order: list[str] = []
    while True:
        ready = sorted(n for n, deps in needs.items() if not deps - set(order) and n not in order)
        if not ready:
            break
        order.append(ready[0])
    return order, sorted(wanted - set(order))


def _functions(rows: Sequence[Any]) -> list[FunctionPlan]:
    """Functions the queries and policies call, created on every node; those taking the
    tenant are delegated to the node holding it. Trigger functions travel with their tables."""
    out = []
    for row in rows:
        if row["is_trigger"]:
            continue
        names, modes = list(row["arg_names"]), list(row["arg_modes"])
        inputs = [n for i, n in enumerate(names) if not modes or modes[i] in ("i", "b", "v")]
        arg = next(
            (
                name
                for name, type_ in zip(inputs, row["in_types"], strict=False)
                if type_ == "uuid" and "tenant" in name
            ),
            None,
        )
        out.append(FunctionPlan(row["signature"], arg))
    return out


def _notes(catalog: Catalog, kinds: Kinds) -> list[str]:
    citus_tables = {n for n, k in kinds.items() if k in ("distributed", "reference")}
    notes = [
        f"triggers on {r['table_name']} ({r['names']}) run on each shard: distributing needs "
        "citus.enable_unsafe_triggers (set above; keep it on for later migrations)"
        for r in catalog["triggers"]
        if r["table_name"] in citus_tables
    ]
    notes += [
        f"{r['table_name']}.{r['name']} is an identity column: on a distributed table values "
        "made on different nodes come from different ranges (unique, not globally ordered)"
        for r in catalog["identity"]
        if kinds.get(r["table_name"]) == "distributed"
    ]
    notes.append(
        "row-level security policies and all indexes (HNSW, GIN, GiST, btree) are created on "
        "every shard by Citus; run knowmind with KNOWMIND_TENANT_SCOPE=transaction (SET LOCAL "
        "app.tenant_id with citus.propagate_set_commands = 'local') so the policies see the "
        "tenant on the workers"
    )
    return notes


# --- apply -----------------------------------------------------------------------------------


async def citus_available(conn: AsyncConnection) -> bool:
    found = await conn.scalar(
        text("SELECT count(*) FROM pg_available_extensions WHERE name = 'citus'")
    )
    return bool(found)


async def plan_for(url: str, schema: str = "public") -> CitusPlan:
    engine = make_engine(url, 1)
    try:
        async with engine.connect() as conn:
            return await read_plan(conn, schema)
    finally:
        await engine.dispose()


async def apply_plan(url: str, plan: CitusPlan) -> None:
    """Run the plan: the extension, then all tables in one transaction, then the functions.
    Refuses (CitusUnavailableError) on a server without Citus, before changing anything."""
    if plan.blockers:
        raise SchemaError(f"the plan has {len(plan.blockers)} blockers; fix them first")
    engine = make_engine(url, 1)
    try:
        async with engine.connect() as conn:
            if not await citus_available(conn):
                raise CitusUnavailableError(
                    "the citus extension is not available on this server "
                    "(pg_available_extensions has no 'citus'): install Citus and add it to "
                    "shared_preload_libraries on the coordinator and every worker, or run "
                    "`knowmind citus plan` and apply its SQL on a Citus coordinator"
                )
        async with engine.begin() as conn:
            await conn.execute(text("CREATE EXTENSION IF NOT EXISTS citus"))
        async with engine.begin() as conn:
            for statement in [*TRANSACTION_SETTINGS, *plan.table_statements()]:
                await conn.execute(text(statement))
        for statement in plan.function_statements():
            async with engine.begin() as conn:
                await conn.execute(text(statement))
    finally:
        await engine.dispose()
