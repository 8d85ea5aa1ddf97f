"""The bm25 stage on the real database: Okapi BM25 scores against an independent pure-Python
BM25 on PostgreSQL's own tokens, statistics kept exact through every write path, index use,
typo corrections, compounds and the query-language signal."""

from __future__ import annotations

import math
import uuid
from collections import Counter
from dataclasses import replace

import pytest
from sqlalchemy import text

from knowmind.db.tenant_scope import UserScope
from knowmind.models.language import language_detector
from knowmind.recall.base import RecallRequest, StageContext
from knowmind.recall.bm25 import LexicalOptions, OkapiBM25Stage
from knowmind.store import lexical
from knowmind.store import tenants as tenant_store
from knowmind.store.lexical import BM25Request, ScoredTerm
from knowmind.store.search import MemoryFilters
from knowmind.store.sql import fetch
from tests.conftest import ADMIN_HEADERS, make_tenant

CORPUS = [
    "Der Hafen von Hamburg ist der größte Hafen Deutschlands.",
    "Hamburg liegt an der Elbe; die Elbe fließt in die Nordsee.",
    "Die Nordsee ist ein Randmeer des Atlantiks.",
    "Der Rhein fließt durch Köln, Düsseldorf und Duisburg.",
    "Köln ist bekannt für seinen Dom und den Karneval.",
    "Der Kölner Dom wurde 1880 vollendet, nach über 600 Jahren Bauzeit am Dom.",
    "Duisburg hat den größten Binnenhafen Europas am Rhein.",
    "Berlin ist die Hauptstadt und die größte Stadt Deutschlands.",
    "Die Spree fließt durch Berlin.",
    "In Hamburg, Köln und Berlin leben zusammen über sechs Millionen Menschen.",
    "Anna Schmidt arbeitet als Projektleiterin bei der Siemens AG in München.",
    "Der Server web-01 wird jeden Sonntag um drei Uhr nachts gepatcht.",
]


async def new_tenant(db) -> uuid.UUID:
    async with db.owner_tx() as conn:
        row = await tenant_store.create_tenant(
            conn, f"bm25-{uuid.uuid4().hex[:8]}", "german", "test-model", 384
        )
    return row.id


async def seed(db, tenant_id: uuid.UUID, texts: list[str], memory_type: str = "semantic") -> None:
    """Memories with one chunk each, written as the app role (the triggers run under RLS)."""
    async with db.tenant_tx(tenant_id) as conn:
        dim = int(
            await conn.scalar(text("SELECT value FROM knowmind_meta WHERE key = 'embedding_dim'"))
        )
        for content in texts:
            memory = await conn.scalar(
                text(
                    "INSERT INTO memories (tenant_id, content, memory_type, content_sha256) "
                    "VALUES (:t, :c, :type, "
                    "sha256(convert_to(:c || gen_random_uuid()::text, 'UTF8'))) RETURNING id"
                ),
                {"t": tenant_id, "c": content, "type": memory_type},
            )
            await conn.execute(
                text(
                    "INSERT INTO chunks (tenant_id, memory_id, ordinal, content, language, "
                    "embedding) VALUES (:t, :m, 0, :c, 'german', "
                    "array_fill(CAST(0.1 AS real), ARRAY[CAST(:dim AS int)])::vector)"
                ),
                {"t": tenant_id, "m": memory, "c": content, "dim": dim},
            )


async def postgres_tokens(db, tenant_id) -> dict[uuid.UUID, Counter[str]]:
    """{chunk: Counter(lexeme → tf)} read from the chunks' stored tsvectors (as the owner)."""
    docs: dict[uuid.UUID, Counter[str]] = {}
    async with db.owner_tx() as conn:
        for (chunk_id,) in await conn.execute(
            text("SELECT id FROM chunks WHERE tenant_id = :t"), {"t": tenant_id}
        ):
            docs[chunk_id] = Counter()
        rows = await conn.execute(
            text(
                "SELECT c.id, u.lexeme, cardinality(u.positions) FROM chunks c, unnest(c.tsv) u "
                "WHERE c.tenant_id = :t"
            ),
            {"t": tenant_id},
        )
        for chunk_id, lexeme, tf in rows:
            docs[chunk_id][lexeme] = tf
    return docs


def python_bm25(docs, query_lexemes, k1, b) -> dict[uuid.UUID, float]:
    """Okapi BM25 with Lucene's idf, straight from the definition."""
    n = len(docs)
    avgdl = sum(sum(tfs.values()) for tfs in docs.values()) / n
    scores = {}
    for chunk_id, tfs in docs.items():
        dl = sum(tfs.values())
        total = 0.0
        for term in query_lexemes:
            df = sum(1 for d in docs.values() if term in d)
            if tfs[term]:
                weight = math.log(1 + (n - df + 0.5) / (df + 0.5))
                total += weight * tfs[term] * (k1 + 1) / (tfs[term] + k1 * (1 - b + b * dl / avgdl))
        if total > 0:
            scores[chunk_id] = total
    return scores


async def query_lexemes(db, question: str) -> list[str]:
    async with db.owner_tx() as conn:
        rows = await conn.execute(
            text("SELECT unnest(tsvector_to_array(to_tsvector('german', :q)))"), {"q": question}
        )
        return list(rows.scalars())


async def bm25(db, tenant_id, question, *, k1=1.2, b=0.75, budget=10**6, limit=50):
    async with db.tenant_tx(tenant_id) as conn:
        dfs, _, stats = await lexical.analyse_query(conn, tenant_id, ["german"], question)
        terms = [ScoredTerm(lexeme, df) for lexeme, df in dfs.items()]
        request = BM25Request(
            tenant_id, terms, stats, MemoryFilters(), limit, k1=k1, b=b, budget=budget
        )
        return await lexical.bm25_candidates(conn, request)


async def analysed_request(
    conn,
    tenant_id,
    question: str,
    *,
    budget: int,
    filters: MemoryFilters | None = None,
    websearch: tuple[str, str] | None = None,
) -> BM25Request:
    """The question analysed for the tenant, as a BM25 request for 10 hits (k1 1.2, b 0.75)."""
    dfs, _, stats = await lexical.analyse_query(conn, tenant_id, ["german"], question)
    return BM25Request(
        tenant_id,
        [ScoredTerm(w, df) for w, df in dfs.items()],
        stats,
        filters or MemoryFilters(),
        10,
        k1=1.2,
        b=0.75,
        budget=budget,
        websearch=websearch,
    )


QUESTIONS = [
    "Welcher Hafen ist der größte in Deutschland?",
    "Durch welche Städte fließt der Rhein?",
    "Wann wurde der Kölner Dom vollendet, der Dom?",
    "Hamburg Köln Berlin Elbe",
]


@pytest.mark.parametrize("k1, b", [(1.2, 0.75), (0.9, 0.4), (2.0, 1.0)])
async def test_scores_equal_an_independent_bm25_on_the_same_tokens(db, k1, b):
    tenant_id = await new_tenant(db)
    await seed(db, tenant_id, CORPUS)
    docs = await postgres_tokens(db, tenant_id)
    for question in QUESTIONS:
        expected = python_bm25(docs, await query_lexemes(db, question), k1, b)
        got = await bm25(db, tenant_id, question, k1=k1, b=b)
        assert expected, question
        assert {chunk for chunk, _, _ in got} == set(expected), question
        for chunk, _, score in got:
            assert score == pytest.approx(expected[chunk], abs=1e-6), question
        assert [s for _, _, s in got] == sorted((s for _, _, s in got), reverse=True)


async def test_bounded_postings_still_score_exactly(db):
    tenant_id = await new_tenant(db)
    await seed(db, tenant_id, CORPUS * 3)  # df of common terms beyond the tiny budget
    docs = await postgres_tokens(db, tenant_id)
    question = "Hamburg Köln Berlin fließt Dom"
    expected = python_bm25(docs, await query_lexemes(db, question), 1.2, 0.75)
    got = await bm25(db, tenant_id, question, budget=1, limit=2)
    assert len(got) == 2
    for chunk, _, score in got:
        assert score == pytest.approx(expected[chunk], abs=1e-6)
    assert got[0][2] == pytest.approx(max(expected.values()), abs=1e-6)


async def assert_statistics_exact(db, tenant_id) -> None:
    docs = await postgres_tokens(db, tenant_id)
    async with db.owner_tx() as conn:
        corpus = (
            await conn.execute(
                text("SELECT chunk_count, total_length FROM bm25_corpus WHERE tenant_id = :t"),
                {"t": tenant_id},
            )
        ).one_or_none()
        lexemes = dict(
            (
                await conn.execute(
                    text("SELECT lexeme, df FROM bm25_lexemes WHERE tenant_id = :t"),
                    {"t": tenant_id},
                )
            ).all()
        )
        postings = {
            (r[0], r[1]): (r[2], r[3])
            for r in await conn.execute(
                text("SELECT chunk_id, lexeme, tf, doc_len FROM chunk_terms WHERE tenant_id = :t"),
                {"t": tenant_id},
            )
        }
    lengths = {chunk: sum(tfs.values()) for chunk, tfs in docs.items()}
    assert (corpus or (0, 0)) in {(len(docs), sum(lengths.values()))} | (
        {None} if not docs else set()
    )
    assert lexemes == dict(Counter(lexeme for tfs in docs.values() for lexeme in tfs))
    assert postings == {
        (chunk, lexeme): (tf, lengths[chunk])
        for chunk, tfs in docs.items()
        for lexeme, tf in tfs.items()
    }


async def test_statistics_stay_exact_through_every_write(client, db):
    tenant = await make_tenant(client)
    tenant_id = uuid.UUID(tenant.id)
    ids = []
    for content in CORPUS[:4]:
        stored = await client.post("/v1/memories", json={"content": content}, headers=tenant.write)
        assert stored.status_code == 201, stored.text
        ids.append(stored.json()["id"])
    await assert_statistics_exact(db, tenant_id)

    assert (await client.delete(f"/v1/memories/{ids[0]}", headers=tenant.write)).status_code in (
        200,
        204,
    )
    await assert_statistics_exact(db, tenant_id)

    doc = {"title": "Flüsse", "content": "# Flüsse\n\nDie Elbe und die Spree. " * 30}
    first = await client.post("/v1/documents", json=doc, headers=tenant.write)
    assert first.status_code in (200, 201), first.text
    await assert_statistics_exact(db, tenant_id)
    doc["content"] = "# Flüsse\n\nDer Rhein und die Mosel fließen zusammen."
    replaced = await client.post("/v1/documents", json=doc, headers=tenant.write)
    assert replaced.status_code in (200, 201), replaced.text
    await assert_statistics_exact(db, tenant_id)

    updated = await client.post(
        f"/v1/memories/{ids[1]}/supersede",
        json={"new_content": "Hamburg liegt an der Elbe und an der Alster."},
        headers=tenant.write,
    )
    assert updated.status_code in (200, 201), updated.text
    erased = await client.delete(f"/v1/memories/{ids[2]}?erase=true", headers=tenant.write)
    assert erased.status_code == 200, erased.text
    await assert_statistics_exact(db, tenant_id)
    async with db.owner_tx() as conn:  # the erased chunk's own words left the vocabulary
        left = await conn.scalar(
            text("SELECT count(*) FROM bm25_lexemes WHERE tenant_id = :t AND lexeme = 'randmeer'"),
            {"t": tenant_id},
        )
    assert left == 0

    gone = await client.delete(f"/v1/admin/tenants/{tenant.id}", headers=ADMIN_HEADERS)
    assert gone.status_code == 200, gone.text
    async with db.owner_tx() as conn:
        for table in ("chunk_terms", "bm25_lexemes", "bm25_corpus"):
            count = await conn.scalar(
                text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"), {"t": tenant_id}
            )
            assert count == 0, table


async def test_candidates_come_from_the_impact_index_not_a_scan(db):
    tenant_id = await new_tenant(db)
    filler = [f"Gemeinsamer Bericht Nummer {i} über Hafen und Stadt {i % 7}." for i in range(600)]
    await seed(db, tenant_id, filler + CORPUS)
    async with db.owner_tx() as conn:
        await conn.execute(text("ANALYZE chunk_terms"))
    async with db.tenant_tx(tenant_id) as conn:
        request = await analysed_request(conn, tenant_id, "Bericht Hafen Hamburg", budget=100)
        plan = await lexical.bm25_plan(conn, request)
    assert "chunk_terms_impact" in plan
    assert "Seq Scan on chunk_terms" not in plan
    # a session held to one end user (row-level security on chunks and memories): the same
    scope = UserScope(tenant_id, "someone")
    async with db.tenant_tx(scope) as conn:
        request = await analysed_request(conn, scope, "Bericht Hafen Hamburg", budget=100)
        plan = await lexical.bm25_plan(conn, request)
    assert "chunk_terms_impact" in plan
    assert "Seq Scan on chunk_terms" not in plan and "Seq Scan on chunks" not in plan


async def stage_search(db, tenant_id, question, options=None):
    stage = OkapiBM25Stage(options or LexicalOptions(), language_detector())
    ctx = StageContext(db=db, query_embedding=None, query_entities=None, results_of=None)
    query = RecallRequest(
        text=question,
        tenant_id=tenant_id,
        language="german",
        filters=MemoryFilters(),
        candidates=10,
    )
    return await stage.search(query, ctx), ctx


async def test_typos_compounds_and_language_signals(db):
    tenant_id = await new_tenant(db)
    await seed(db, tenant_id, CORPUS)
    anna = "Anna Schmidt arbeitet als Projektleiterin bei der Siemens AG in München."
    async with db.owner_tx() as conn:
        anna_chunk = await conn.scalar(
            text("SELECT id FROM chunks WHERE tenant_id = :t AND content = :c"),
            {"t": tenant_id, "c": anna},
        )

    found, ctx = await stage_search(db, tenant_id, "Wer ist Projektleitrein?")
    assert found and found[0].chunk_id == anna_chunk
    assert ctx.explain["bm25_corrections"] == {"projektleitrein": ["projektleit"]}
    assert ctx.signals["bm25"]["corrected"] == 1.0
    off, _ = await stage_search(
        db, tenant_id, "Wer ist Projektleitrein?", LexicalOptions(typos=False)
    )
    assert anna_chunk not in [c.chunk_id for c in off[:1]]

    found, ctx = await stage_search(db, tenant_id, "Wer ist die Leiterin des Projekts?")
    assert found and found[0].chunk_id == anna_chunk
    assert "projektleit" in ctx.explain["bm25_compounds"]["leit"]  # snowball: "leiterin" → "leit"
    none, _ = await stage_search(
        db,
        tenant_id,
        "Wer ist die Leiterin des Projekts?",
        LexicalOptions(compounds=False, typos=False),
    )
    assert anna_chunk not in [c.chunk_id for c in none]

    _, german = await stage_search(db, tenant_id, "Welcher Fluss fließt durch Berlin?")
    _, english = await stage_search(db, tenant_id, "Which river flows through the city of Berlin?")
    assert german.signals["bm25"]["language_match"] == 1.0
    assert english.signals["bm25"]["language_match"] == 0.0
    assert english.explain["bm25_languages"] == ["german", "english"]
    assert set(german.signals["bm25"]) == {
        "query_terms",
        "matched_share",
        "corrected",
        "top_score",
        "score_gap",
        "language_match",
        "hits",
    }


async def test_a_simple_tenant_indexes_each_memory_in_its_language(client, db):
    tenant = await make_tenant(client, language="simple")
    texts = {
        "german": "Der Kölner Dom wurde nach über sechshundert Jahren Bauzeit endlich vollendet.",
        "english": "The cathedral of Cologne was finally completed after six hundred years.",
        "simple": "web-01 db-02 10.0.0.7",
    }
    for content in texts.values():
        stored = await client.post("/v1/memories", json={"content": content}, headers=tenant.write)
        assert stored.status_code == 201, stored.text
    async with db.owner_tx() as conn:
        rows = await conn.execute(
            text("SELECT content, language::text FROM chunks WHERE tenant_id = :t"),
            {"t": tenant.id},
        )
        indexed = {content: language for content, language in rows}
    assert indexed == {content: language for language, content in texts.items()}


async def test_selective_filters_still_fill_the_result(db):
    tenant_id = await new_tenant(db)
    await seed(db, tenant_id, [f"Hafen, Hafen und noch ein Hafen, Nummer {i}." for i in range(300)])
    rare = ["Am Hafen stehen drei Kräne und ein Lager.", "Ein Hafen ist kein Flughafen."]
    await seed(db, tenant_id, rare, memory_type="procedural")
    async with db.tenant_tx(tenant_id) as conn:
        request = await analysed_request(
            conn, tenant_id, "Hafen", budget=40, filters=MemoryFilters(memory_type="procedural")
        )
        found = await lexical.bm25_candidates(conn, request)
        contents = await conn.execute(
            text("SELECT content FROM chunks WHERE tenant_id = :t AND id = ANY(:ids)"),
            {"t": tenant_id, "ids": [chunk for chunk, _, _ in found]},
        )
        assert sorted(contents.scalars()) == sorted(rare)


async def test_web_search_fallback_scores_the_matching_chunks_only(db):
    """A phrase query whose bounded read finds too few matching chunks falls back to scoring
    the chunks that match it (found through the full-text index by an owner-run function):
    the same hits, in the same order, as scoring every posting and filtering."""
    tenant_id = await new_tenant(db)
    other_id = await new_tenant(db)
    filler = [f"Am Hafen, am Hafen und am Hafen, Bericht {i}." for i in range(300)]
    both = ["Vom Hafen aus sieht man den Kölner Dom nicht.", "Zum Kölner Dom? Nicht am Hafen."]
    await seed(db, tenant_id, filler + CORPUS + both)
    await seed(db, other_id, CORPUS + both)
    question = 'Hafen "Kölner Dom"'
    async with db.tenant_tx(tenant_id) as conn:
        request = await analysed_request(
            conn, tenant_id, question, budget=40, websearch=("german", question)
        )
        bounded_sql, params, partial = request.statement()
        assert partial and len(await fetch(conn, bounded_sql, params)) < request.limit
        found = await lexical.bm25_candidates(conn, request)
        every_sql, every_params, _ = request.statement("exhaustive")
        every = await fetch(conn, every_sql, every_params)
        contents = await conn.execute(
            text("SELECT id, content FROM chunks WHERE tenant_id = :t AND id = ANY(:ids)"),
            {"t": tenant_id, "ids": [chunk for chunk, _, _ in found]},
        )
        by_id = dict(contents.all())
        # the function reads the session's tenant only
        foreign = await conn.scalar(
            text("SELECT count(*) FROM knowmind_websearch_chunks(:t, 'german', :q)"),
            {"t": other_id, "q": question},
        )
    async with db.app_tx() as conn:  # no tenant set: nothing
        unset = await conn.scalar(
            text("SELECT count(*) FROM knowmind_websearch_chunks(:t, 'german', :q)"),
            {"t": tenant_id, "q": question},
        )
    assert unset == 0
    assert [(c, round(s, 9)) for c, _, s in found] == [(r[0], round(r[2], 9)) for r in every]
    assert sorted(by_id[c] for c, _, _ in found) == sorted(both)
    assert foreign == 0
    with pytest.raises(ValueError, match="web-search"):
        replace(request, websearch=None).statement("matching")


async def test_the_query_is_analysed_by_lexeme_look_ups_not_a_vocabulary_scan(db):
    """The df of each query lexeme is one primary-key probe: a tenant's vocabulary of
    thousands of lexemes is never read for a question of a few words (as a join, the planner
    hashed all of it)."""
    tenant_id = await new_tenant(db)
    words = [f"Fachbegriff{i}x" for i in range(3000)]
    filler = [" ".join(words[i : i + 30]) + " im Hafen." for i in range(0, 3000, 30)]
    await seed(db, tenant_id, filler + CORPUS)
    async with db.owner_tx() as conn:
        await conn.execute(text("ANALYZE bm25_lexemes"))
    question = "Welcher Hafen ist der größte in Deutschland?"
    async with db.tenant_tx(tenant_id) as conn:
        vocabulary = await conn.scalar(
            text("SELECT count(*) FROM bm25_lexemes WHERE tenant_id = :t"), {"t": tenant_id}
        )
        dfs, _, _ = await lexical.analyse_query(conn, tenant_id, ["german"], question)
        plan = await lexical.analysis_plan(conn, tenant_id, ["german"], question)
    assert vocabulary > 3000
    assert dfs["haf"] == len(filler) + 1 and dfs["deutschland"] == 2, dfs
    read = [line for line in plan.splitlines() if "on bm25_lexemes" in line]
    assert read and all("Index" in line for line in read), plan
    # rows read from the vocabulary in all: at most one per query lexeme
    rows_read = sum(
        float(line.split("rows=")[1].split()[0]) * int(line.split("loops=")[1].split(")")[0])
        for line in read
    )
    assert rows_read <= len(dfs), plan
