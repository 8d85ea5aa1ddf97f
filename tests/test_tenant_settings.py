"""A tenant's own settings (GET/PATCH /v1/settings): its language model and multi-query
expansion, used by the answers; changed by a tenant admin token only, audited, per tenant."""

from __future__ import annotations

import pytest

from knowmind.models.llm import LLMSetup
from knowmind.models.llm_embedded import embedded_weights
from tests.conftest import ADMIN_HEADERS, make_tenant

if embedded_weights(LLMSetup()) is None:
    pytest.skip("the embedded model's weights are missing (make install)", allow_module_level=True)

SMALL = {"k": 2, "max_tokens": 32}


async def test_settings_default_change_and_reset(client) -> None:
    tenant, other = await make_tenant(client), await make_tenant(client)
    defaults = {"llm_model": None, "multi_query": True, "extraction_prompt": None}
    assert (await client.get("/v1/settings", headers=tenant.read)).json() == defaults
    refused = await client.patch("/v1/settings", json={"multi_query": False}, headers=tenant.write)
    assert refused.status_code == 403  # an admin token's business
    changed = await client.patch(
        "/v1/settings",
        json={"multi_query": False, "llm_model": "smollm2-135m-instruct"},
        headers=tenant.admin,
    )
    assert changed.status_code == 200, changed.text
    assert changed.json() == {
        "llm_model": "smollm2-135m-instruct",
        "multi_query": False,
        "extraction_prompt": None,
    }
    assert (await client.get("/v1/settings", headers=other.read)).json() == defaults
    unknown = await client.patch("/v1/settings", json={"llm_model": "gpt-9"}, headers=tenant.admin)
    assert unknown.status_code == 422 and unknown.json()["field"] == "llm_model"
    typo = await client.patch("/v1/settings", json={"multiquery": True}, headers=tenant.admin)
    assert typo.status_code == 422
    reset = await client.patch("/v1/settings", json={"llm_model": None}, headers=tenant.admin)
    assert reset.json() == {"llm_model": None, "multi_query": False, "extraction_prompt": None}
    audit = await client.get(f"/v1/admin/audit?tenant_id={tenant.id}", headers=ADMIN_HEADERS)
    actions = [e["action"] for e in audit.json()]
    assert actions.count("tenant.settings") == 2  # the refused ones changed nothing


async def test_answers_follow_the_tenant_settings(client) -> None:
    tenant = await make_tenant(client, language="english")
    for content in ("The canteen opens at noon.", "Backups run every night at two o'clock."):
        await client.post("/v1/memories", json={"content": content}, headers=tenant.write)
    await client.patch("/v1/settings", json={"multi_query": False}, headers=tenant.admin)
    question = "When does the canteen open and when do backups run?"
    asked = await client.post(
        "/v1/answer",
        json={**SMALL, "question": question, "method": "multi_query"},
        headers=tenant.read,
    )
    body = asked.json()
    assert body["method_details"]["retrieval"] == "recall" and "rephrase" not in body["timings_ms"]
    assert any(r.startswith("multi_query: off for this tenant") for r in body["degraded_reasons"])
    auto = await client.post(
        "/v1/answer", json={**SMALL, "question": question, "method": "auto"}, headers=tenant.read
    )
    decision = auto.json()["method_details"]["decision"]
    assert decision == {"method": "standard", "because": "multi_query is off for this tenant"}
