"""Tenant-aware nearest-neighbour search: exact over a small tenant's rows, HNSW for a large one.

One HNSW index serves every tenant; a large tenant may also have an HNSW index of its own
(``store.tenant_index``). For a tenant with few rows, walking the shared graph and discarding
other tenants' neighbours is slower than computing every distance of its own rows (and, bounded
by ``hnsw.max_scan_tuples``, may even return fewer than ``limit``), so the search counts the
tenant's rows up to a threshold first (an index-only probe, bounded work; the same round trip
asks whether the tenant has a valid index of its own) and picks:

- ``exact``: the tenant's rows through the ``chunks_tenant`` btree, every distance computed,
  top ``limit`` sorted — exact, a few milliseconds for a few thousand rows;
- ``tenant-hnsw-halfvec``: the tenant's own HNSW index (a graph of its vectors only, cast to
  ``halfvec``): the walk orders by the cast, the candidates are then re-sorted by the
  full-precision distance. It is built with more links per node than the global index and
  reaches the same recall at a smaller ``ef_search`` (``DEFAULT_TENANT_EF_SEARCH``). The planner
  uses a partial index only when it sees the tenant id as a constant, i.e. in a custom plan, so
  the statement's transaction forces custom plans (a prepared statement may otherwise switch to
  a generic plan after five executions);
- ``tenant-hnsw``: the same over an index on the column itself (a ``halfvec`` column, or an
  index built by an earlier version);
- ``hnsw``: the global HNSW index.

The HNSW paths use iterative scans, so filters keep the scan going until ``limit`` rows pass.
With only the time predicates and the memory type (filters most rows pass) the planner is told
not to sort and not to scan tables (``enable_sort``, ``enable_seqscan`` off), so a misestimate
of a time predicate cannot turn the index walk into a scan; with selective filters (tags,
source, domain, document, a user, agent or session, an event-time window) the planner chooses
between the index and filtering first. These settings (``db.reader.NEAREST_SESSION``) are the
session's own on the vector stage's sessions (``Database.read(…, nearest=True)``: no
BEGIN/COMMIT round trips), else they are set for the statement's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal
from uuid import UUID

import numpy as np

from knowmind.db.reader import NEAREST_SESSION
from knowmind.store.search import MemoryFilters
from knowmind.store.sql import (
    Conn,
    driver,
    fetch,
    fetchrow,
    one_transaction,
    vector_text,
)
from knowmind.store.tenant_index import INDEX_USABLE, halfvec_key, tenant_index_name

__all__ = [
    "DEFAULT_EF_SEARCH",
    "DEFAULT_EXACT_MAX_ROWS",
    "DEFAULT_TENANT_EF_SEARCH",
    "VectorPath",
    "choose_vector_path",
    "explain_vector_search",
    "path_ef_search",
    "statement_candidates",
    "vector_candidates",
]

VectorPath = Literal["exact", "tenant-hnsw-halfvec", "tenant-hnsw", "hnsw"]
# Above this many rows a tenant is searched through HNSW (exact costs ≈ 2.7 µs per row here
# with the vectors in their rows, migration 0015; ≈ 5 µs with them out of line).
DEFAULT_EXACT_MAX_ROWS = 2000
# A tenant holding a share s of the table sees about s × ef_search of each HNSW pass.
DEFAULT_EF_SEARCH = 200
# A tenant's own index (m 24, see store.tenant_index) reaches recall@10 ≥ 0.95 at half that.
DEFAULT_TENANT_EF_SEARCH = 100
_SELECTIVE_FILTERS = (
    *("tags", "source", "domain", "document_id"),
    *("user_id", "agent_id", "session_id", "occurred_after", "occurred_before"),
)

# the tenant's rows counted up to :cap, and its own index when complete and usable: NULL when
# there is none, true when it indexes an expression (the halfvec cast), false for the column
_PATH_FACTS = (
    "SELECT (SELECT count(*) FROM (SELECT 1 FROM chunks WHERE tenant_id = :tenant LIMIT :cap)"
    f" AS rows), (SELECT CASE WHEN {INDEX_USABLE} THEN indexprs IS NOT NULL END FROM pg_index"
    " WHERE indexrelid = to_regclass(:index))"
)
_SELECT = (
    " SELECT c.id, c.memory_id, c.embedding <=> :embedding AS distance FROM chunks c"
    " JOIN memories m ON m.tenant_id = c.tenant_id AND m.id = c.memory_id"
)


def path_ef_search(path: VectorPath, ef_search: int, tenant_ef_search: int) -> int:
    """``hnsw.ef_search`` along ``path``: ``tenant_ef_search`` on a tenant's own halfvec index
    (built denser, see ``DEFAULT_TENANT_EF_SEARCH``), else ``ef_search``."""
    return tenant_ef_search if path == "tenant-hnsw-halfvec" else ef_search


async def choose_vector_path(
    conn: Conn, tenant_id: UUID, exact_max_rows: int = DEFAULT_EXACT_MAX_ROWS
) -> VectorPath:
    """``exact`` when the tenant holds at most ``exact_max_rows`` chunks (counted up to that),
    else ``tenant-hnsw-halfvec`` or ``tenant-hnsw`` when it has a valid index of its own, else
    ``hnsw``. One round trip."""
    params = {
        "tenant": tenant_id,
        "cap": max(exact_max_rows, 0) + 1,
        "index": tenant_index_name(tenant_id),
    }
    rows, own_index_on_cast = await fetchrow(conn, _PATH_FACTS, params)
    if exact_max_rows > 0 and int(rows) <= exact_max_rows:
        return "exact"
    if own_index_on_cast is None:
        return "hnsw"
    return "tenant-hnsw-halfvec" if own_index_on_cast else "tenant-hnsw"


def _statement(
    path: VectorPath, filters: MemoryFilters, tenant_id: UUID, embedding: np.ndarray, limit: int
) -> tuple[str, dict[str, Any]]:
    where, params = filters.sql()
    params |= {"tenant": tenant_id, "embedding": vector_text(embedding), "limit": limit}
    if path == "exact":
        # OFFSET 0 fences the subquery: distances of the tenant's rows, then a top-k sort.
        sql = (
            "SELECT id, memory_id, 1 - distance FROM ("
            f"{_SELECT} WHERE c.tenant_id = :tenant{where} OFFSET 0) AS tenant_rows"
            " ORDER BY distance, id LIMIT :limit"
        )
    else:
        order = "c.embedding <=> :embedding"
        if path == "tenant-hnsw-halfvec":  # the index's key, and the query cast alike
            half = f"halfvec({len(embedding)})"
            order = f"{halfvec_key(len(embedding), 'c.embedding')} <=> CAST(:embedding AS {half})"
        sql = (
            "WITH nearest AS MATERIALIZED ("
            f"{_SELECT} WHERE c.tenant_id = :tenant{where}"
            f" ORDER BY {order} LIMIT :limit)"
            " SELECT id, memory_id, 1 - distance FROM nearest ORDER BY distance, id"
        )
    return sql, params


def _selective(filters: MemoryFilters) -> bool:
    return any(getattr(filters, name) for name in _SELECTIVE_FILTERS)


def _settings(path: VectorPath, filters: MemoryFilters, ef_search: int) -> str:
    """The HNSW path's transaction-local settings (empty for the exact path): the nearest
    sessions' own, with the planner free to filter first when the filters are selective."""
    if path == "exact":
        return ""
    settings = NEAREST_SESSION | {"hnsw.ef_search": str(int(ef_search))}
    if _selective(filters):
        settings |= {"enable_sort": "on", "enable_seqscan": "on"}
    return "; ".join(f"SET LOCAL {name} = {value}" for name, value in settings.items())


async def _walk(
    conn: Conn, path: VectorPath, filters: MemoryFilters, ef_search: int, sql: str, params: Any
) -> list[Any]:
    """Run an HNSW path's statement: on a nearest session (``Database.read(…, nearest=True)``)
    outside a transaction as it is, with the session's settings (``ef_search`` set on it when
    it changes: no BEGIN/COMMIT round trips); elsewhere, or with selective filters, in a
    transaction with ``_settings`` (the caller's, or one of its own)."""
    raw = await driver(conn)
    if getattr(raw, "nearest", False) and not raw.is_in_transaction() and not _selective(filters):
        await raw.use_ef_search(ef_search)
        return await fetch(raw, sql, params)
    async with one_transaction(raw, _settings(path, filters, ef_search)) as tx:
        return await fetch(tx, sql, params)


async def vector_candidates(
    conn: Conn,
    tenant_id: UUID,
    embedding: np.ndarray,
    filters: MemoryFilters,
    limit: int,
    *,
    path: VectorPath = "hnsw",
    ef_search: int = DEFAULT_EF_SEARCH,
) -> list[tuple[UUID, UUID, float]]:
    """(chunk id, memory id, cosine similarity), nearest first, along ``path``.

    ``relaxed_order`` HNSW results are re-sorted exactly by the outer query. The HNSW paths
    run with the planner settings of ``_walk``.
    """
    statement, params = _statement(path, filters, tenant_id, embedding, limit)
    if path == "exact":
        rows = await fetch(conn, statement, params)
    else:
        rows = await _walk(conn, path, filters, max(ef_search, limit), statement, params)
    return [(r[0], r[1], float(r[2])) for r in rows]


async def explain_vector_search(
    conn: Conn,
    tenant_id: UUID,
    embedding: np.ndarray,
    filters: MemoryFilters,
    limit: int,
    path: VectorPath,
) -> str:
    """The plan PostgreSQL picks for ``vector_candidates`` along ``path`` (for tests, tuning)."""
    statement, params = _statement(path, filters, tenant_id, embedding, limit)
    if path == "exact":
        rows = await fetch(conn, "EXPLAIN " + statement, params)
    else:
        rows = await _walk(conn, path, filters, max(100, limit), "EXPLAIN " + statement, params)
    return "\n".join(str(r[0]) for r in rows)


async def statement_candidates(
    conn: Conn,
    tenant_id: UUID,
    embedding: np.ndarray,
    filters: MemoryFilters,
    kinds: Sequence[str],
    limit: int,
) -> list[tuple[UUID, UUID, float]]:
    """(chunk id, memory id, cosine similarity) of the tenant's statement chunks of ``kinds``,
    nearest first: exact, through the partial index of tagged chunks (``chunks_statements``);
    a tenant's statements are a few per document."""
    where, params = filters.sql()
    params |= {
        "tenant": tenant_id,
        "embedding": vector_text(embedding),
        "kinds": list(kinds),
        "limit": limit,
    }
    sql = (
        "SELECT id, memory_id, 1 - distance FROM ("
        f"{_SELECT} WHERE c.tenant_id = :tenant AND c.kind IS NOT NULL"
        f" AND c.kind = ANY(:kinds){where} OFFSET 0) AS statements"
        " ORDER BY distance, id LIMIT :limit"
    )
    rows = await fetch(conn, sql, params)
    return [(r[0], r[1], float(r[2])) for r in rows]
