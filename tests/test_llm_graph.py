"""The LLM graph extractor: reading a model's answer onto the ontology (unit), the tenant's
``extraction_prompt`` setting (validated on save), storing what a model extracted on the real
database (entities, typed relations, mentions; a predicate the ontology refuses is skipped; the
memory's erasure takes them), and the whole extraction job with the real embedded model."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from uuid import UUID

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from knowmind.app import create_app
from knowmind.graph.ontology import Ontology
from knowmind.ingest.llm_graph import parse_extraction
from knowmind.models.llm import LLMSetup, Message
from knowmind.models.llm_embedded import embedded_weights
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.graph import GraphService
from knowmind.services.llm_graph import LLMGraphExtraction
from knowmind.settings import SettingsError
from tests.conftest import make_tenant

ANSWER = (
    'Sure! Here it is: {"entities": [{"name": "Anna Schmidt", "class": "person"}, '
    '{"name": "Nordwind GmbH", "class": "Company"}, {"name": "Kassel", "class": "City"}, '
    '{"name": ""}], "relations": [{"subject": "Anna Schmidt", "predicate": "works for", '
    '"object": "Nordwind GmbH"}, {"subject": "Anna Schmidt", "predicate": "LIVES_IN", '
    '"object": "Kassel"}]} Hope this helps.'
)
PROMPT = "Entities and relations as JSON, please. Text: __CHUNK__"


def test_the_answer_is_read_onto_the_ontology() -> None:
    classes = Ontology.default().classes
    entities, relations = parse_extraction(ANSWER, classes)
    assert [(e.name, e.entity_class) for e in entities] == [
        ("Anna Schmidt", "Person"),
        ("Nordwind GmbH", "Organization"),
        ("Kassel", "Topic"),  # a class we do not have: Topic, not invented
    ]
    assert [(r.subject, r.predicate, r.object) for r in relations] == [
        ("Anna Schmidt", "WORKS_FOR", "Nordwind GmbH"),
        ("Anna Schmidt", "LIVES_IN", "Kassel"),
    ]
    assert parse_extraction("I cannot help with that.", classes) == ([], [])
    assert parse_extraction('{"entities": "none"}', classes) == ([], [])


async def test_the_prompt_setting_must_hold_the_placeholder(client) -> None:
    tenant = await make_tenant(client)
    bad = await client.patch(
        "/v1/settings", json={"extraction_prompt": "Extract entities."}, headers=tenant.admin
    )
    assert bad.status_code == 422 and "extraction_prompt" in bad.text
    good = await client.patch(
        "/v1/settings", json={"extraction_prompt": PROMPT}, headers=tenant.admin
    )
    assert good.status_code == 200 and good.json()["extraction_prompt"] == PROMPT
    again = await client.get("/v1/settings", headers=tenant.read)
    assert again.json()["extraction_prompt"] == PROMPT


class CompletionDouble:
    """Test double for a language model: answers every prompt with ``ANSWER`` and keeps the
    prompts it was given."""

    provider, model = "double", "double"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def complete(self, messages: Sequence[Message], *, max_tokens: int = 256, **_: object):
        from knowmind.models.llm import Completion

        self.prompts.append(messages[-1]["content"])
        return Completion(ANSWER, 10, 10, "stop")


async def test_extracted_graph_is_stored_and_erased_with_the_memory(client, db) -> None:
    tenant = await make_tenant(client)
    tenant_id = UUID(tenant.id)
    await client.patch("/v1/settings", json={"extraction_prompt": PROMPT}, headers=tenant.admin)
    stored = await client.post(
        "/v1/memories",
        json={"content": "Anna Schmidt arbeitet bei der Nordwind GmbH in Kassel."},
        headers=tenant.write,
    )
    memory_id = UUID(stored.json()["id"])
    double = CompletionDouble()

    async def model_for(who: Principal):
        return double, None

    step = LLMGraphExtraction(db, GraphService(db), model_for, server_prompt=None)
    counts = await step(tenant_id, memory_id)
    assert double.prompts[0].startswith("Entities and relations as JSON, please. Text: Anna")
    assert counts["llm_entities"] == 3
    assert counts["llm_relations"] == 1 and counts["llm_relations_skipped"] == 1  # LIVES_IN
    async with db.tenant_tx(tenant_id) as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT a.name, e.predicate, b.name FROM edges e "
                    "JOIN entities a ON a.tenant_id = e.tenant_id AND a.id = e.from_id "
                    "JOIN entities b ON b.tenant_id = e.tenant_id AND b.id = e.to_id"
                )
            )
        ).all()
        origins = set((await conn.execute(text("SELECT origin FROM entities"))).scalars())
    assert ("Anna Schmidt", "WORKS_FOR", "Nordwind GmbH") in [tuple(r) for r in rows]
    assert ("Nordwind GmbH", "HAS_EMPLOYEE", "Anna Schmidt") in [tuple(r) for r in rows]
    assert "llm" in origins
    erased = await client.delete(f"/v1/memories/{memory_id}?erase=true", headers=tenant.write)
    assert erased.status_code == 200, erased.text
    async with db.tenant_tx(tenant_id) as conn:
        assert await conn.scalar(text("SELECT count(*) FROM edges")) == 0


@pytest.mark.skipif(
    embedded_weights(LLMSetup()) is None,
    reason="the embedded model's weights are missing: make install fetches them",
)
async def test_the_extraction_job_asks_the_real_model(settings, embedder, db) -> None:
    app = create_app(settings.with_overrides(extractors="gazetteer,llm"), embedder=embedder)
    async with AsyncTestClient(app=app) as server:
        tenant = await make_tenant(server)
        stored = await server.post(
            "/v1/memories",
            json={"content": "Anna Schmidt arbeitet bei der Nordwind GmbH in Kassel."},
            headers=tenant.write,
        )
        job_id = stored.json()["job_id"]
        for _ in range(600):
            job = (await server.get(f"/v1/jobs/{job_id}", headers=tenant.read)).json()
            if job["status"] in ("done", "failed"):
                break
            await asyncio.sleep(0.2)
        assert job["status"] == "done", job
        result = job["result"]
        assert {"llm_entities", "llm_relations", "llm_relations_skipped"} <= set(result)
        async with db.tenant_tx(UUID(tenant.id)) as conn:
            llm_mentions = await conn.scalar(
                text("SELECT count(*) FROM mentions WHERE method = 'llm'")
            )
        # every entity the model named was stored with a mention (the tiny model may name none)
        assert llm_mentions >= result["llm_entities"]


async def test_llm_extraction_without_a_model_is_refused_at_start(settings, embedder) -> None:
    broken = settings.with_overrides(extractors="gazetteer,llm", llm_provider="none")
    with pytest.raises(SettingsError, match="KNOWMIND_EXTRACTORS=llm needs a language model"):
        await Runtime.start(broken, embedder)
