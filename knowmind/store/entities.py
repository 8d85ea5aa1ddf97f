"""entities and their normalised names (inside a tenant transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from uuid import UUID

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.contract.records import EntityFields
from knowmind.store.scalars import maybe_id
from knowmind.store.sql import Conn, fetch

__all__ = [
    "EntityRow",
    "NewEntity",
    "entities_by_id",
    "find_entities_by_norm",
    "get_entity",
    "insert_entity_if_missing",
    "lookup_names",
    "search_entities",
    "search_entities_many",
    "upsert_entity",
]

_COLUMNS = (
    "e.id, e.name, e.entity_class, e.description, e.aliases, e.origin, e.confidence, e.created_at"
)


class EntityRow(EntityFields, frozen=True):
    score: float | None = None  # a search's similarity


@dataclass(frozen=True, slots=True, kw_only=True)
class NewEntity:
    name: str
    norm_name: str
    entity_class: str
    description: str | None = None
    aliases: tuple[str, ...] = ()
    alias_norms: tuple[str, ...] = ()
    origin: str = "api"
    confidence: float = 1.0


async def upsert_entity(
    conn: AsyncConnection, tenant_id: UUID, entity: NewEntity
) -> tuple[EntityRow, bool]:
    """Insert or merge (aliases united, description kept unless a new one is given).
    Returns the row and whether it was created."""
    row = (
        await conn.execute(
            text(
                "INSERT INTO entities AS e (tenant_id, name, norm_name, entity_class, description, "
                "aliases, origin, confidence) VALUES (:t, :name, :norm, :cls, :descr, :aliases, "
                ":origin, :conf) ON CONFLICT (tenant_id, norm_name, entity_class) DO UPDATE SET "
                "aliases = ARRAY(SELECT DISTINCT a FROM unnest(e.aliases || EXCLUDED.aliases) a "
                "ORDER BY a), description = coalesce(EXCLUDED.description, e.description), "
                "origin = CASE WHEN EXCLUDED.origin = 'api' THEN 'api' ELSE e.origin END, "
                "confidence = greatest(e.confidence, EXCLUDED.confidence) "
                f"RETURNING {_COLUMNS}, (xmax = 0) AS created"
            ),
            {
                "t": tenant_id,
                "name": entity.name,
                "norm": entity.norm_name,
                "cls": entity.entity_class,
                "descr": entity.description,
                "aliases": list(entity.aliases),
                "origin": entity.origin,
                "conf": entity.confidence,
            },
        )
    ).one()
    await _insert_names(conn, tenant_id, row.id, entity.norm_name, entity.alias_norms)
    values = dict(row._mapping)
    created = values.pop("created")
    return EntityRow(**values), bool(created)


async def insert_entity_if_missing(
    conn: AsyncConnection, tenant_id: UUID, entity: NewEntity
) -> UUID:
    """Find-or-create without touching an existing entity (no needless row versions)."""
    existing = await maybe_id(
        conn,
        text(
            "SELECT id FROM entities WHERE tenant_id = :t AND norm_name = :n AND entity_class = :c"
        ),
        {"t": tenant_id, "n": entity.norm_name, "c": entity.entity_class},
    )
    if existing is not None:
        return existing
    row, _ = await upsert_entity(conn, tenant_id, entity)
    return row.id


async def _insert_names(
    conn: AsyncConnection,
    tenant_id: UUID,
    entity_id: UUID,
    norm_name: str,
    alias_norms: Sequence[str],
) -> None:
    names = [norm_name, *[a for a in alias_norms if a and a != norm_name]]
    await conn.execute(
        text(
            "INSERT INTO entity_names (tenant_id, entity_id, norm_name, is_alias) "
            "SELECT :t, :e, n, ord > 1 FROM unnest(CAST(:names AS text[])) WITH ORDINALITY "
            "AS x(n, ord) ON CONFLICT DO NOTHING"
        ),
        {"t": tenant_id, "e": entity_id, "names": names},
    )


async def get_entity(conn: AsyncConnection, tenant_id: UUID, entity_id: UUID) -> EntityRow | None:
    row = (
        await conn.execute(
            text(f"SELECT {_COLUMNS} FROM entities e WHERE e.tenant_id = :t AND e.id = :id"),
            {"t": tenant_id, "id": entity_id},
        )
    ).one_or_none()
    return EntityRow(**row._mapping) if row else None


async def find_entities_by_norm(
    conn: AsyncConnection, tenant_id: UUID, norm_name: str
) -> list[EntityRow]:
    """Entities whose name or alias normalises to ``norm_name`` (any class)."""
    rows = await conn.execute(
        text(
            f"SELECT DISTINCT {_COLUMNS} FROM entity_names n JOIN entities e "
            "ON e.tenant_id = n.tenant_id AND e.id = n.entity_id "
            "WHERE n.tenant_id = :t AND n.norm_name = :n"
        ),
        {"t": tenant_id, "n": norm_name},
    )
    return [EntityRow(**r._mapping) for r in rows]


# pg_trgm's default thresholds of ``%`` (similarity) and ``<%`` (word similarity)
_THRESHOLDS = {"sim": 0.3, "wsim": 0.6}
_SCORE = "max(greatest(similarity(c.norm_name, :q), word_similarity(:q, c.norm_name)))"
_MATCHES = "(similarity(c.norm_name, :q) >= :sim OR word_similarity(:q, c.norm_name) >= :wsim)"
# names taken per entity asked for (an entity's aliases may crowd the best names)
_NEAREST_PER_RESULT = 4


async def search_entities(
    conn: AsyncConnection,
    tenant_id: UUID,
    norm_query: str,
    limit: int,
    entity_class: str | None = None,
) -> list[EntityRow]:
    """Fuzzy match on names and aliases: trigram similarity of the whole name, or of the
    query as a word within a longer name ("anna" finds "anna meier"), best first."""
    if entity_class:
        rows = await conn.execute(
            text(
                f"SELECT {_COLUMNS}, {_SCORE} AS score FROM entity_names c JOIN entities e "
                "ON e.tenant_id = :t AND e.id = c.entity_id "
                f"WHERE c.tenant_id = :t AND e.entity_class = :cls AND {_MATCHES} "
                f"GROUP BY {_COLUMNS} ORDER BY score DESC, e.name LIMIT :limit"
            ),
            {"t": tenant_id, "q": norm_query, "limit": limit, "cls": entity_class, **_THRESHOLDS},
        )
        return [EntityRow(**r._mapping) for r in rows]
    return (await search_entities_many(conn, tenant_id, [norm_query], limit)).get(norm_query, [])


async def search_entities_many(
    conn: Conn, tenant_id: UUID, norm_queries: Sequence[str], limit: int
) -> dict[str, list[EntityRow]]:
    """``search_entities`` for several queries in one statement: {query: rows best first}.

    The candidates of a query are the tenant's best-matching names, found by
    ``knowmind_similar_names`` (migration 0006: a tenant-led GIN trigram index scan, answering
    for the session's tenant only; under row-level security a similarity filter could not use
    an index), at most a few per entity asked for (an entity's aliases may crowd them)."""
    if not norm_queries:
        return {}
    rows = await fetch(
        conn,
        (
            f"SELECT c.query, {_COLUMNS}, max(c.score) AS score "
            "FROM knowmind_similar_names(CAST(:t AS uuid), CAST(:qs AS text[]), "
            "CAST(:n AS int)) AS c "
            "JOIN entities e ON e.tenant_id = :t AND e.id = c.entity_id "
            f"GROUP BY c.query, {_COLUMNS}"
        ),
        {"t": tenant_id, "qs": sorted(set(norm_queries)), "n": _NEAREST_PER_RESULT * limit},
    )
    found: dict[str, list[EntityRow]] = {}
    for row in rows:
        values = dict(row)
        found.setdefault(values.pop("query"), []).append(EntityRow(**values))
    return {
        q: sorted(found_rows, key=lambda r: (-(r.score or 0.0), r.name))[:limit]
        for q, found_rows in found.items()
    }


async def entities_by_id(
    conn: Conn, tenant_id: UUID, entity_ids: Sequence[UUID]
) -> dict[UUID, EntityRow]:
    """The tenant's entities among ``entity_ids``, by id (unknown ids are left out)."""
    if not entity_ids:
        return {}
    rows = await fetch(
        conn,
        f"SELECT {_COLUMNS} FROM entities e WHERE e.tenant_id = :t AND e.id = ANY(:ids)",
        {"t": tenant_id, "ids": list(entity_ids)},
    )
    return {r["id"]: EntityRow(**r) for r in rows}


async def lookup_names(
    conn: Conn, tenant_id: UUID, candidates: list[str]
) -> dict[str, list[tuple[UUID, str]]]:
    """Exact lookup of many normalised n-grams at once: {ngram: [(entity id, class)]}."""
    if not candidates:
        return {}
    rows = await fetch(
        conn,
        (
            "SELECT n.norm_name, e.id, e.entity_class FROM entity_names n JOIN entities e "
            "ON e.tenant_id = n.tenant_id AND e.id = n.entity_id "
            "WHERE n.tenant_id = :t AND n.norm_name = ANY(CAST(:names AS text[]))"
        ),
        {"t": tenant_id, "names": candidates},
    )
    found: dict[str, list[tuple[UUID, str]]] = {}
    for norm, entity_id, entity_class in rows:
        found.setdefault(norm, []).append((entity_id, entity_class))
    return found
