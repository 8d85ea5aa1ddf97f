"""A large tenant's own HNSW index: a partial index over its chunks only.

The global ``chunks_embedding`` graph holds every tenant's vectors, so a filtered walk for one
tenant visits (and discards) the others' rows: recall drops and the walk gets slower as the
table grows. A partial index ``WHERE tenant_id = '<uuid>'`` is a graph of that tenant's
vectors alone. Over a ``vector`` column it indexes the vectors cast to ``halfvec`` (half the
bytes read per distance; the vector stage orders by that cast and re-sorts the candidates by
the full-precision distance), with more links per node and a larger ``ef_construction`` than
the global index. It costs a second (half-size) copy of the tenant's vectors in an index, so
it is built only for large tenants (``knowmind tenant-index``). Indexes that earlier versions
built on the column itself stay usable (the vector stage asks which kind a tenant has).

``CREATE``/``DROP INDEX CONCURRENTLY`` cannot run inside a transaction: these functions need an
autocommit owner connection (``Database.owner_autocommit``). A build that fails or is cancelled
leaves an invalid index behind; the vector stage never uses one (``pg_index.indisvalid``) and
the next build drops and rebuilds it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

__all__ = [
    "INDEX_USABLE",
    "TENANT_EF_CONSTRUCTION",
    "TENANT_INDEX_PREFIX",
    "TENANT_M",
    "TenantIndex",
    "build_tenant_index",
    "drop_tenant_index",
    "halfvec_key",
    "list_tenant_indexes",
    "tenant_chunk_counts",
    "tenant_index_name",
]

TENANT_INDEX_PREFIX = "chunks_embedding_t_"
# pg_index: built completely (a CONCURRENTLY build that failed or is still running is not)
INDEX_USABLE = "indisvalid AND indisready"
_GLOBAL_INDEX = "chunks_embedding"
# A tenant index is built once per large tenant and probed on every recall of it: a better
# graph than pgvector's default (m 16, ef_construction 64) is worth the build time. On the
# scale corpus's 100k-chunk tenant (60 questions, 50 candidates, one 2-core host), recall@10
# against exact search and the walk's p50: vector m 16: 0.948 at ef_search 200 (5.5 ms);
# halfvec m 16: 0.96 at ef_search 200 (4.5 ms); halfvec m 24: 0.957 at ef_search 100
# (3.7 ms; build 63 s); halfvec m 32: 0.96 at ef_search 80 (no faster; build 92 s).
TENANT_EF_CONSTRUCTION = 128
TENANT_M = 24
# "... USING hnsw (embedding vector_cosine_ops)" with optional storage options "WITH (m='16')"
_HNSW_DEFINITION = re.compile(
    r"USING hnsw (\(embedding (?:vector|halfvec)_cosine_ops\))( WITH \([a-z_]+='?\d+'?"
    r"(?:, [a-z_]+='?\d+'?)*\))?$"
)


@dataclass(frozen=True, slots=True)
class TenantIndex:
    tenant_id: UUID
    name: str
    valid: bool
    size_bytes: int
    on_halfvec_cast: bool  # False: on the column itself (an earlier version's, or halfvec)


def tenant_index_name(tenant_id: UUID) -> str:
    """``chunks_embedding_t_<32 hex>``: derived from the UUID alone (safe to put in DDL)."""
    return TENANT_INDEX_PREFIX + UUID(str(tenant_id)).hex


async def _tenant_index_method(conn: AsyncConnection) -> str:
    """``(<key> <opclass>) WITH (...)``: the global HNSW index's options with ``m`` and
    ``ef_construction`` at least ``TENANT_M`` and ``TENANT_EF_CONSTRUCTION``; over a ``vector``
    column the key is its ``halfvec`` cast."""
    definition = await conn.scalar(
        text("SELECT indexdef FROM pg_indexes WHERE tablename = 'chunks' AND indexname = :name"),
        {"name": _GLOBAL_INDEX},
    )
    found = _HNSW_DEFINITION.search(str(definition or ""))
    if found is None:
        raise RuntimeError(f"unexpected definition of the {_GLOBAL_INDEX} index: {definition!r}")
    options = dict(re.findall(r"([a-z_]+)='?(\d+)'?", found.group(2) or ""))
    for name, least in (("m", TENANT_M), ("ef_construction", TENANT_EF_CONSTRUCTION)):
        options[name] = str(max(int(options.get(name, 0)), least))
    key = found.group(1)
    if key == "(embedding vector_cosine_ops)":
        dimensions = await conn.scalar(
            text(
                "SELECT atttypmod FROM pg_attribute"
                " WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
            )
        )
        key = f"(({halfvec_key(int(dimensions))}) halfvec_cosine_ops)"
    return key + " WITH (" + ", ".join(f"{k} = {v}" for k, v in options.items()) + ")"


def halfvec_key(dimensions: int, column: str = "embedding") -> str:
    """The tenant index's key over a ``vector`` column; queries order by the same expression."""
    return f"{column}::halfvec({int(dimensions)})"


async def _index_valid(conn: AsyncConnection, name: str) -> bool | None:
    """True/False for a valid/invalid index of that name; None when there is none."""
    valid = await conn.scalar(
        text(f"SELECT {INDEX_USABLE} FROM pg_index WHERE indexrelid = to_regclass(:index)"),
        {"index": name},
    )
    return None if valid is None else bool(valid)


async def build_tenant_index(conn: AsyncConnection, tenant_id: UUID) -> bool:
    """Build the tenant's index (autocommit connection). False when a valid one exists."""
    name = tenant_index_name(tenant_id)
    state = await _index_valid(conn, name)
    if state:
        return False
    if state is False:  # left over from a failed or interrupted build
        await conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
    method = await _tenant_index_method(conn)
    tenant = UUID(str(tenant_id))  # a UUID's text form: no quoting issue possible
    await conn.execute(
        text(
            f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON chunks USING hnsw {method} "
            f"WHERE tenant_id = '{tenant}'::uuid"
        )
    )
    return True


async def drop_tenant_index(conn: AsyncConnection, tenant_id: UUID) -> bool:
    """Drop the tenant's index (autocommit connection). False when it had none."""
    name = tenant_index_name(tenant_id)
    if await _index_valid(conn, name) is None:
        return False
    await conn.execute(text(f"DROP INDEX CONCURRENTLY IF EXISTS {name}"))
    return True


async def list_tenant_indexes(conn: AsyncConnection) -> list[TenantIndex]:
    """Every tenant index, valid or not, with its size on disk."""
    rows = await conn.execute(
        text(
            f"SELECT c.relname, {INDEX_USABLE}, pg_relation_size(c.oid), i.indexprs IS NOT NULL "
            "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE i.indrelid = 'chunks'::regclass AND c.relname LIKE :prefix "
            "ORDER BY c.relname"
        ),
        {"prefix": TENANT_INDEX_PREFIX.replace("_", r"\_") + "%"},
    )
    return [
        TenantIndex(
            UUID(hex=str(r[0])[len(TENANT_INDEX_PREFIX) :]), str(r[0]), bool(r[1]), r[2], bool(r[3])
        )
        for r in rows
    ]


async def tenant_chunk_counts(conn: AsyncConnection, min_rows: int) -> dict[UUID, int]:
    """Chunks per tenant, for tenants holding at least ``min_rows`` (owner connection)."""
    rows = await conn.execute(
        text(
            "SELECT tenant_id, count(*) FROM chunks GROUP BY tenant_id "
            "HAVING count(*) >= :n ORDER BY count(*) DESC"
        ),
        {"n": min_rows},
    )
    return {r[0]: int(r[1]) for r in rows}
