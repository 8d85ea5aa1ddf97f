"""The learned ranker in the server (the packaged model, the real database and embedder):
relation questions answered through the graph, scores that are probabilities, ``min_score``
through REST and MCP, and every door saying which ranker ran."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import TenantAccess, make_tenant
from tests.test_mcp import ok

CORPUS = Path(__file__).resolve().parent.parent / "benchmark" / "corpora" / "relations.json"
# Multi-hop questions of the relation corpus with their answers' memories kept in the tenant.
QUESTIONS = (
    "Who leads the project that Miriam Hoffmann works on?",
    "Welche Spedition beliefert die Bäckerei, die Tobias Wolf führt?",
)
DISTRACTORS = 60  # further memories of the corpus, in its order


def _corpus_slice() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(memories to store, with classes on their relations; the questions asked)."""
    corpus = json.loads(CORPUS.read_text())
    classes = {e["name"]: e["class"] for e in corpus["entities"]}
    asked = [q for q in corpus["questions"] if q["text"] in QUESTIONS]
    keys = {k for q in asked for k in q["gold"]}
    chosen = [m for m in corpus["memories"] if m["key"] in keys]
    chosen += [m for m in corpus["memories"] if m["key"] not in keys][:DISTRACTORS]
    memories = [
        {
            "title": m.get("title"),
            "content": m["content"],
            "source": m["key"],
            "relations": [
                r | {"subject_class": classes[r["subject"]], "object_class": classes[r["object"]]}
                for r in m.get("relations", [])
            ],
        }
        for m in chosen
    ]
    return memories, asked


async def _store(client, tenant: TenantAccess, memories: list[dict[str, Any]]) -> None:
    for memory in memories:
        stored = await client.post("/v1/memories", json=memory, headers=tenant.write)
        assert stored.status_code == 201, stored.text


async def test_multi_hop_relation_questions_are_answered_through_the_graph(client):
    tenant = await make_tenant(client)
    memories, asked = _corpus_slice()
    await _store(client, tenant, memories)
    assert len(asked) == 2
    for question in asked:
        answer = next(k for k, grade in question["gold"].items() if grade == 2)
        found = await client.post(
            "/v1/recall",
            json={"query": question["text"], "k": 3, "explain": True},
            headers=tenant.read,
        )
        assert found.status_code == 200, found.text
        body = found.json()
        assert body["ranker"] == "learned" and not body["degraded"], body["degraded_reasons"]
        sources = [hit["source"] for hit in body["results"]]
        assert answer in sources, (question["text"], sources)
        hit = body["results"][sources.index(answer)]
        assert hit["stages"]["relations"] is not None  # the path found it
        assert hit["explanation"]["features"]["path_final"] == 1.0
        assert body["explain"]["ranker"]["name"] == "learned"


async def test_scores_are_probabilities_and_min_score_drops_what_is_below(client):
    tenant = await make_tenant(client)
    facts = [
        "Die Kantine öffnet werktags um halb zwölf und schließt um vierzehn Uhr.",
        "Der Server web-01 wird jeden Sonntag um drei Uhr gepatcht.",
        "Anna Schmidt leitet das Projekt Nordlicht in München.",
    ]
    await _store(client, tenant, [{"content": f} for f in facts])
    query = {"query": "Wann öffnet die Kantine?", "k": 3}
    every = (await client.post("/v1/recall", json=query, headers=tenant.read)).json()
    scores = [hit["score"] for hit in every["results"]]
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert every["results"][0]["content"] == facts[0]
    assert scores[0] > 0.5 > scores[-1]  # the answer is likely, the unrelated fact is not

    cut = (scores[0] + scores[1]) / 2
    kept = await client.post("/v1/recall", json=query | {"min_score": cut}, headers=tenant.read)
    assert [h["content"] for h in kept.json()["results"]] == [facts[0]]
    via_mcp = await ok(client, tenant.read, "knowmind_recall_memories", query | {"min_score": cut})
    assert [h["content"] for h in via_mcp["hits"]] == [facts[0]]
    assert via_mcp["hits"][0]["score"] == kept.json()["results"][0]["score"]

    refused = await client.post("/v1/recall", json=query | {"min_score": 1.5}, headers=tenant.read)
    assert refused.status_code in (400, 422) and "min_score" in refused.text


async def test_capabilities_and_the_fused_order_on_request(client, tenant: TenantAccess):
    capabilities = (await client.get("/v1/capabilities", headers=tenant.read)).json()
    assert capabilities["ranker"]["active"] == "learned"
    assert capabilities["ranker"]["reason"] is None
    assert "LightGBM" in capabilities["ranker"]["description"]
    await _store(client, tenant, [{"content": "Die Kantine öffnet werktags um halb zwölf."}])
    fused = await client.post(
        "/v1/recall", json={"query": "Kantine", "ranker": "rrf"}, headers=tenant.read
    )
    assert fused.json()["ranker"] == "rrf"
    hit = fused.json()["results"][0]
    assert hit["score"] == hit["fused"]  # the fused order scores by its share
