"""Catalog queries behind the Citus plan (``knowmind/db/citus.py``): tables, unique keys,
exclusion constraints, foreign keys, policies, identity columns, triggers, functions and, on a
Citus server, the tables it already manages. Rows only; the rules live in ``citus.py``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = ["read_catalog"]

_TABLES = """
SELECT c.relname AS name, a.attnum AS tenant_attnum, a.attnotnull AS tenant_not_null,
       a.attgenerated <> '' AS tenant_generated, format_type(a.atttypid, NULL) AS tenant_type
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_attribute a
  ON a.attrelid = c.oid AND a.attname = :col AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = :schema AND c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                  AND d.objid = c.oid AND d.deptype = 'e')
ORDER BY c.relname
"""

_UNIQUE_INDEXES = """
SELECT t.relname AS table_name, coalesce(con.conname, i.relname) AS name,
       (x.indkey::int2[])[0:x.indnkeyatts - 1] AS keys
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
LEFT JOIN pg_constraint con ON con.conindid = x.indexrelid AND con.conrelid = t.oid
  AND con.contype IN ('p', 'u')
WHERE n.nspname = :schema AND x.indisunique
"""

_EXCLUSIONS = """
SELECT t.relname AS table_name, c.conname AS name, c.conkey AS keys,
       ARRAY(SELECT o.oprname FROM unnest(c.conexclop) WITH ORDINALITY u(op, i)
             JOIN pg_operator o ON o.oid = u.op ORDER BY u.i) AS operators
FROM pg_constraint c
JOIN pg_class t ON t.oid = c.conrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = :schema AND c.contype = 'x'
"""

_FOREIGN_KEYS = """
SELECT c.conname AS name, src.relname AS source, dst.relname AS target,
       dn.nspname AS target_schema, c.conkey AS keys, c.confkey AS target_keys,
       c.confdeltype::text AS on_delete, c.confupdtype::text AS on_update
FROM pg_constraint c
JOIN pg_class src ON src.oid = c.conrelid
JOIN pg_namespace sn ON sn.oid = src.relnamespace
JOIN pg_class dst ON dst.oid = c.confrelid
JOIN pg_namespace dn ON dn.oid = dst.relnamespace
WHERE sn.nspname = :schema AND c.contype = 'f' AND c.conparentid = 0
ORDER BY src.relname, c.conname
"""

_POLICIES_WITH_SUBQUERIES = """
SELECT t.relname AS table_name, p.polname AS name
FROM pg_policy p
JOIN pg_class t ON t.oid = p.polrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = :schema
  AND (coalesce(p.polqual::text, '') LIKE '%{SUBLINK%'
       OR coalesce(p.polwithcheck::text, '') LIKE '%{SUBLINK%')
"""

_IDENTITY_COLUMNS = """
SELECT t.relname AS table_name, a.attname AS name, format_type(a.atttypid, NULL) AS type
FROM pg_attribute a
JOIN pg_class t ON t.oid = a.attrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = :schema AND t.relkind IN ('r', 'p') AND a.attidentity <> ''
  AND NOT a.attisdropped
"""

_TRIGGERS = """
SELECT t.relname AS table_name, string_agg(g.tgname, ', ' ORDER BY g.tgname) AS names
FROM pg_trigger g
JOIN pg_class t ON t.oid = g.tgrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = :schema AND NOT g.tgisinternal
GROUP BY t.relname
"""

_FUNCTIONS = """
SELECT p.oid::regprocedure::text AS signature,
       p.prorettype = 'trigger'::regtype AS is_trigger,
       coalesce(p.proargnames, '{}') AS arg_names,
       coalesce(p.proargmodes::text[], '{}') AS arg_modes,
       ARRAY(SELECT format_type(a, NULL) FROM unnest(p.proargtypes) WITH ORDINALITY u(a, i)
             ORDER BY u.i) AS in_types
FROM pg_proc p
JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = :schema AND p.prokind = 'f'
  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                  AND d.objid = p.oid AND d.deptype = 'e')
ORDER BY 1
"""

_CITUS_TABLES = """
SELECT c.relname AS name,
       CASE WHEN p.partmethod = 'h' THEN 'distributed'
            WHEN p.repmodel = 't' THEN 'reference' ELSE 'local' END AS kind
FROM pg_dist_partition p
JOIN pg_class c ON c.oid = p.logicalrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = :schema
"""


async def _rows(conn: AsyncConnection, sql: str, **params: Any) -> list[Any]:
    return list((await conn.execute(text(sql), params)).mappings().all())


async def read_catalog(conn: AsyncConnection, schema: str, column: str) -> dict[str, list[Any]]:
    """Rows of every query for ``schema`` (``column``: the distribution column)."""
    p = {"schema": schema}
    catalog = {
        "tables": await _rows(conn, _TABLES, col=column, **p),
        "unique": await _rows(conn, _UNIQUE_INDEXES, **p),
        "exclusions": await _rows(conn, _EXCLUSIONS, **p),
        "foreign_keys": await _rows(conn, _FOREIGN_KEYS, **p),
        "policies": await _rows(conn, _POLICIES_WITH_SUBQUERIES, **p),
        "identity": await _rows(conn, _IDENTITY_COLUMNS, **p),
        "triggers": await _rows(conn, _TRIGGERS, **p),
        "functions": await _rows(conn, _FUNCTIONS, **p),
        "citus": [],
    }
    if await conn.scalar(text("SELECT to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL")):
        catalog["citus"] = await _rows(conn, _CITUS_TABLES, **p)
    return catalog
