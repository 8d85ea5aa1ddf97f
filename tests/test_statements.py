"""Statement chunks (``preference``/``fact``/``update``, tagged by knowmind's client): stored
with their kind, and favoured by the recall for questions that ask about them — measured on a
small corpus (tests/fixtures/statements_corpus.py) with and without the statements stage."""

from __future__ import annotations

import json

from litestar.testing import AsyncTestClient

from knowmind.recall.base import RecallRequest, StageContext
from knowmind.recall.statements import StatementStage, statement_kinds
from tests.conftest import TenantAccess
from tests.fixtures.statements_corpus import LOGS, QUESTIONS, Log

ALL_BUT_STATEMENTS = ["bm25", "vector", "graph", "identity", "relations"]


def test_the_kinds_a_question_asks_about() -> None:
    assert statement_kinds("What kind of coffee do I prefer?") == ("preference", "fact")
    assert statement_kinds("Welchen Editor benutze ich inzwischen?") == ("fact", "update")
    assert statement_kinds("Wo laufe ich am liebsten?") == ("preference", "fact")
    assert statement_kinds("Who founded the Siemens AG?") == ()
    assert statement_kinds("Zahlungsziel der Müller GmbH") == ()


async def test_a_question_about_nothing_personal_makes_no_query() -> None:
    """The stage answers without a database when the question asks about no kind (a test
    double stands in for the shared context: it fails if anything is awaited)."""

    async def never() -> None:
        raise AssertionError("the stage should not need the query embedding")

    ctx = StageContext(db=None, query_embedding=never, query_entities=never, results_of=never)  # type: ignore[arg-type]
    found = await StatementStage().search(RecallRequest(text="Wer gründete Siemens?"), ctx)
    assert found == []


def _upload_body(log: Log) -> dict[str, object]:
    """What knowmind's client sends: its own chunks with e5-large vectors (1024-d; this server
    runs another model, so it re-embeds them and the vectors' values are never read) and the
    statements it extracted, tagged in ``metadata.type``."""
    chunks = [{"content": log.content, "embedding": [0.1] * 1024}]
    chunks += [
        {"content": f"[{kind}] {text}", "embedding": [0.1] * 1024, "metadata": {"type": kind}}
        for kind, text in log.statements
    ]
    return {
        "title": log.title,
        "content": log.content,
        "chunks": chunks,
        "embeddingModel": "Xenova/multilingual-e5-large",
    }


async def _recall(
    client: AsyncTestClient, tenant: TenantAccess, question: str, stages: list[str] | None
) -> list[dict]:
    body: dict[str, object] = {"query": question, "k": 5, "rerank": False}
    if stages is not None:
        body["stages"] = stages
    response = await client.post("/v1/recall", json=body, headers=tenant.read)
    assert response.status_code == 200, response.text
    return response.json()["results"]


async def test_statements_are_stored_with_their_kind_and_favoured(client, tenant) -> None:
    titles = {}
    for log in LOGS:
        response = await client.post("/api/documents", json=_upload_body(log), headers=tenant.write)
        assert response.status_code == 201, response.text
        answer = response.json()
        assert answer["embeddingProvider"] == "server" and "re-embedded" in answer["embeddingNote"]
        # the server's chunks of the log, and every statement beside them
        assert answer["chunksWritten"] >= 1 + len(log.statements)
        titles[log.title] = log.key

    measured: dict[str, dict[str, float]] = {}
    for label, stages in (("with statements", None), ("without", ALL_BUT_STATEMENTS)):
        hits_at_1, reciprocal, shown = 0, 0.0, 0
        for question in QUESTIONS:
            results = await _recall(client, tenant, question.text, stages)
            keys = [titles[r["title"]] for r in results]
            if keys and keys[0] == question.answer:
                hits_at_1 += 1
                shown += results[0]["kind"] == question.kind
            if question.answer in keys:
                reciprocal += 1 / (keys.index(question.answer) + 1)
        n = len(QUESTIONS)
        measured[label] = {
            "hit@1": hits_at_1 / n,
            "mrr@5": round(reciprocal / n, 3),
            "statement shown": shown / n,
        }
    print("statements stage:", json.dumps(measured))
    on, off = measured["with statements"], measured["without"]
    assert on["hit@1"] >= off["hit@1"] and on["mrr@5"] >= off["mrr@5"], measured
    assert on["hit@1"] > off["hit@1"] or on["mrr@5"] > off["mrr@5"], measured
    # asked for, the statement is what the answer shows whenever its memory comes first
    assert on["statement shown"] == on["hit@1"] >= off["statement shown"], measured


async def test_client_embedded_statements_keep_their_kind(client, tenant, embedder) -> None:
    log = LOGS[0]
    texts = [log.content] + [f"[{k}] {t}" for k, t in log.statements]
    vectors = embedder.embed_passages(texts).tolist()
    chunks = [{"content": log.content, "embedding": vectors[0]}]
    chunks += [
        {"content": texts[1], "embedding": vectors[1], "metadata": {"type": "preference"}},
        {
            "content": "[mood] I feel fine today.",
            "embedding": vectors[1],
            "metadata": {"type": "x"},
        },
    ]
    body = {
        "title": log.title,
        "content": log.content,
        "chunks": chunks,
        "embeddingModel": embedder.model_id,
    }
    response = await client.post("/api/documents", json=body, headers=tenant.write)
    assert response.status_code == 201 and response.json()["embeddingProvider"] == "client"
    results = await _recall(client, tenant, "What kind of coffee do I prefer?", None)
    assert results[0]["kind"] == "preference" and results[0]["content"] == texts[1]
    assert results[0]["stages"]["statements"] == 1
    # an unknown tag is kept as a plain chunk, never as a statement
    statements = await _recall(client, tenant, "Do I like how I feel today?", ["statements"])
    assert [(r["kind"], r["content"]) for r in statements] == [("preference", texts[1])]
