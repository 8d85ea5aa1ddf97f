"""RAPTOR summary trees: clustering and the tree's levels (unit), and end to end with the real
embedded language model and embedder — ``build_tree`` on an upload builds a tree in a job, the
``raptor`` answer method retrieves its nodes, no other recall sees them, and erasing or replacing
the document takes the tree with it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from knowmind.app import create_app
from knowmind.ingest.raptor import build_tree, cluster
from knowmind.models.llm import LLMSetup
from knowmind.models.llm_embedded import embedded_weights
from tests.conftest import TenantAccess, make_tenant

TOPICS = {
    "Kantine": "Die Kantine in Kassel öffnet werktags um halb zwölf und bietet drei Gerichte an.",
    "Leuchtturm": "Der Leuchtturm auf Hiddensee ist 28 Meter hoch und wurde 1888 gebaut.",
    "Backups": "Die Sicherungen der Lagerdatenbank laufen jede Nacht um zwei Uhr.",
}


def _groups_of(labels: Sequence[int]) -> set[frozenset[int]]:
    found: dict[int, set[int]] = {}
    for index, label in enumerate(labels):
        found.setdefault(label, set()).add(index)
    return {frozenset(g) for g in found.values()}


def test_cluster_finds_separated_groups_and_places_every_row_once() -> None:
    rng = np.random.default_rng(7)
    centres = np.eye(8)[:3] * 10
    rows = np.concatenate([c + rng.normal(0, 0.3, (5, 8)) for c in centres])
    order = rng.permutation(len(rows))
    groups = cluster(rows[order], size=5)
    assert sorted(i for g in groups for i in g) == list(range(15))
    truth = _groups_of([int(order[i]) // 5 for i in range(15)])
    assert {frozenset(g) for g in groups} == truth
    assert cluster(rows[:4], size=5) == [[0, 1, 2, 3]]  # fewer than a cluster: one group


async def test_tree_levels_summarise_clusters_up_to_one_root() -> None:
    asked: list[int] = []

    async def summarise_double(texts: Sequence[str]) -> str:  # test double for the model
        asked.append(len(texts))
        return " + ".join(texts)

    async def embed_double(texts: Sequence[str]) -> np.ndarray:  # test double: sum of one-hots
        return np.stack(
            [np.bincount([int(w) % 16 for w in t.split(" + ")], minlength=16) for t in texts],
            dtype=float,
        )

    contents = [str(i) for i in range(23)]
    vectors = np.eye(16)[[i % 16 for i in range(23)]]
    nodes = await build_tree(contents, vectors, summarise_double, embed_double, size=5)
    by_level = {level: [n for n in nodes if n.level == level] for level in (1, 2, 3)}
    assert len(by_level[1]) == 5 and sum(n.children for n in by_level[1]) == 23
    assert len(by_level[2]) == 1 and by_level[2][0].children == 5  # the root
    assert not by_level[3]
    assert sorted(asked) == sorted([n.children for n in nodes])


needs_model = pytest.mark.skipif(
    embedded_weights(LLMSetup()) is None,
    reason="the embedded model's weights are missing: make install fetches them",
)


async def _finished(client: AsyncTestClient, tenant: TenantAccess, job_id: str) -> dict:
    for _ in range(1500):
        job = (await client.get(f"/v1/jobs/{job_id}", headers=tenant.read)).json()
        if job["status"] in ("done", "failed"):
            return job
        await asyncio.sleep(0.2)
    raise AssertionError(f"job {job_id} did not finish")


async def _nodes(db, tenant: TenantAccess) -> int:
    async with db.tenant_tx(tenant.id) as conn:
        return int(await conn.scalar(text("SELECT count(*) FROM summary_nodes")))


def _document() -> str:
    sections = [f"## {title} {i}\n\n{fact} Abschnitt {i}." for i in range(4)
                for title, fact in TOPICS.items()]  # fmt: skip
    return "# Betriebshandbuch\n\n" + "\n\n".join(sections)


@needs_model
async def test_build_tree_raptor_answers_from_it_and_erasure_takes_it(client, db) -> None:
    tenant = await make_tenant(client)
    upload = {"title": "Handbuch", "content": _document(), "build_tree": True}
    stored = await client.post("/v1/documents?wait=true", json=upload, headers=tenant.write)
    assert stored.status_code == 201, stored.text
    document = stored.json()
    assert document["tree_job_id"] and document["tree_note"] is None
    job = await _finished(client, tenant, document["tree_job_id"])
    assert job["status"] == "done", job
    levels = job["result"]["levels"]
    assert job["result"]["leaves"] == document["chunks"] and levels["1"] >= 1
    assert await _nodes(db, tenant) == sum(levels.values())

    async with db.tenant_tx(tenant.id) as conn:
        node_ids = {
            str(i) for i in (await conn.execute(text("SELECT id FROM summary_nodes"))).scalars()
        }
    question = {"query": "Wann öffnet die Kantine?", "k": 10}
    hits = (await client.post("/v1/recall", json=question, headers=tenant.read)).json()
    assert hits["results"] and not {h["chunk_id"] for h in hits["results"]} & node_ids

    body = {"question": "Worum geht es im Betriebshandbuch?", "method": "raptor", "k": 4}
    answer = await client.post("/v1/answer", json={**body, "max_tokens": 32}, headers=tenant.read)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    summaries = [p for p in result["passages"] if p["summary_level"]]
    assert result["method_details"]["retrieval"] == "raptor" and summaries
    assert {p["chunk_id"] for p in summaries} <= node_ids
    assert result["method_details"]["summaries"] == len(summaries)
    assert not any(r.startswith("raptor") for r in result["degraded_reasons"])

    replaced = {"title": "Handbuch", "content": _document() + "\n\nNachtrag."}
    again = await client.post("/v1/documents?wait=true", json=replaced, headers=tenant.write)
    assert again.json()["status"] == "replaced" and again.json()["tree_job_id"] is None
    assert await _nodes(db, tenant) == 0  # the old text's tree went with it

    rebuilt = await client.post(
        "/v1/documents?wait=true", json={**replaced, "content": replaced["content"] + "!",
                                         "build_tree": True}, headers=tenant.write,
    )  # fmt: skip
    assert (await _finished(client, tenant, rebuilt.json()["tree_job_id"]))["status"] == "done"
    assert await _nodes(db, tenant) > 0
    erased = await client.delete(f"/v1/documents/{document['id']}?erase=true", headers=tenant.write)
    assert erased.status_code == 200, erased.text
    assert await _nodes(db, tenant) == 0


async def test_without_a_model_the_upload_says_no_tree(settings, embedder) -> None:
    app = create_app(settings.with_overrides(llm_provider="none"), embedder=embedder)
    async with AsyncTestClient(app=app) as other:
        tenant = await make_tenant(other)
        upload = {"title": "Kurz", "content": TOPICS["Kantine"], "build_tree": True}
        stored = (await other.post("/v1/documents", json=upload, headers=tenant.write)).json()
        assert stored["status"] == "created" and stored["tree_job_id"] is None
        assert stored["tree_note"].startswith("no summary tree: no language model")
        caps = (await other.get("/v1/capabilities")).json()["answer"]
        assert caps["summary_trees"] is False and "raptor" in caps["unavailable"]
        body = {"question": "Wann öffnet die Kantine?", "method": "raptor", "k": 2}
        answer = (await other.post("/v1/answer", json=body, headers=tenant.read)).json()
        assert answer["degraded"] is True and answer["passages"]
