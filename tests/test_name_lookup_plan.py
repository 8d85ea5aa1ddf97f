"""The fuzzy entity-name look-up reads the names that share trigrams with the phrase, never
every name of a large tenant (migration 0014): on a real table where the tenant holds most
names, the way a DBpedia tenant of 16k names does."""

from __future__ import annotations

from uuid import UUID

from sqlalchemy import text

from knowmind.store.entities import search_entities_many
from tests.conftest import make_tenant

ALIASES = 20_000
# heap rows the statement's scans of entity_names fetched in this transaction
_FETCHED = "SELECT pg_stat_get_xact_tuples_fetched('entity_names'::regclass)"


async def _tenant_with_many_names(client, db) -> UUID:
    tenant = UUID((await make_tenant(client)).id)
    async with db.owner_tx() as conn:
        entity = await conn.scalar(
            text(
                "INSERT INTO entities (tenant_id, name, norm_name, entity_class) "
                "VALUES (:t, 'Germany', 'germany', 'Place') RETURNING id"
            ),
            {"t": tenant},
        )
        await conn.execute(
            text(
                "INSERT INTO entity_names (tenant_id, entity_id, norm_name, is_alias) "
                "SELECT CAST(:t AS uuid), CAST(:e AS uuid), 'germany', false UNION ALL "
                "SELECT CAST(:t AS uuid), CAST(:e AS uuid), 'topic number ' || i, true "
                "FROM generate_series(1, :n) i"
            ),
            {"t": tenant, "e": entity, "n": ALIASES},
        )
        await conn.execute(text("ANALYZE entity_names"))
    return tenant


async def test_a_fuzzy_name_look_up_reads_only_names_sharing_trigrams(client, db):
    """With trigram comparisons costed like an integer comparison, the planner could read the
    tenant's whole posting list and compare every name (≈ 6 µs each: 95 ms a phrase at 16k
    names); costed as what they cost, it reads the trigram postings. Both the similarity and
    the word-similarity match still come back."""
    tenant = await _tenant_with_many_names(client, db)
    async with db.tenant_tx(tenant) as conn:
        before = await conn.scalar(text(_FETCHED))
        found = await search_entities_many(conn, tenant, ["germny", "germany national"], 3)
        fetched = await conn.scalar(text(_FETCHED)) - before
    assert [row.name for row in found["germny"]] == ["Germany"]  # similarity (a typo)
    assert [row.name for row in found["germany national"]] == ["Germany"]  # word similarity
    assert fetched < ALIASES / 20, f"{fetched} names fetched for two phrases"
