"""GET /metrics: Prometheus text with request counts and latencies by route template and
status, recall stage latencies, the embedding queue, jobs and mirror lag; no tenant, id or
content in any label."""

from __future__ import annotations

import re

import pytest
from litestar.testing import AsyncTestClient

from knowmind.app import create_app
from knowmind.metrics import enable_tenant_label
from knowmind.settings import Settings, SettingsError
from tests.conftest import ADMIN_HEADERS, make_tenant


async def test_metrics_count_routes_by_template_and_time_recall_stages(client, tenant):
    stored = await client.post(
        "/v1/memories", json={"content": "Die Kantine öffnet um halb zwölf."}, headers=tenant.write
    )
    memory_id = stored.json()["id"]
    await client.get(f"/v1/memories/{memory_id}", headers=tenant.read)
    await client.post("/v1/recall", json={"query": "Wann öffnet die Kantine?"}, headers=tenant.read)

    assert (await client.get("/metrics")).status_code == 401  # spans every tenant: admin only
    assert (await client.get("/metrics", headers=tenant.admin)).status_code == 403
    scraped = await client.get("/metrics", headers=ADMIN_HEADERS)
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    requests = re.findall(r"^knowmind_requests_total\{(.*)\} (\S+)$", text, re.MULTILINE)
    labelled = [dict(re.findall(r'(\w+)="([^"]*)"', labels)) for labels, _ in requests]
    assert any(
        m.get("path") == "/v1/memories/{memory_id}" and m.get("status_code") == "200"
        for m in labelled
    ), [m.get("path") for m in labelled]
    assert any(m.get("path") == "/v1/recall" for m in labelled)
    assert re.search(r'^knowmind_request_duration_seconds_bucket\{.*path="/v1/recall"', text, re.M)
    for stage in ("bm25", "vector", "total"):
        assert re.search(
            rf'^knowmind_recall_stage_seconds_count\{{stage="{stage}"\}} [1-9]', text, re.M
        )
    for gauge in ("knowmind_embed_queue_passages", "knowmind_mirror_pending_changes"):
        assert re.search(rf"^{gauge} \d", text, re.M)
    assert re.search(r'^knowmind_jobs\{state="waiting"\} \d', text, re.M)
    # the recall gate: nothing runs or waits between requests
    assert re.search(r'^knowmind_recalls\{state="running"\} 0', text, re.M)
    assert re.search(r'^knowmind_recalls\{state="waiting"\} 0', text, re.M)
    # nothing that names a tenant or a stored thing
    assert tenant.id not in text and memory_id not in text and "Kantine" not in text


async def test_the_tenant_label_only_when_opted_in(settings, embedder):
    """KNOWMIND_METRICS_TENANT_LABEL=on: requests by tenant and status class, recall latency by
    tenant (the tenant's id, never its name). Runs last here: the registry is the process's."""
    app = create_app(settings.with_overrides(metrics_tenant_label="on"), embedder=embedder)
    try:
        async with AsyncTestClient(app=app) as client:
            tenant = await make_tenant(client)
            await client.post("/v1/recall", json={"query": "Wer?"}, headers=tenant.read)
            await client.post("/v1/recall", json={"query": "Wer?", "k": 99}, headers=tenant.read)
            text = (await client.get("/metrics", headers=ADMIN_HEADERS)).text
    finally:
        enable_tenant_label(False)
    ok = rf'^knowmind_tenant_requests_total\{{status="2xx",tenant="{tenant.id}"\}} ([0-9.]+)$'
    refused = rf'^knowmind_tenant_requests_total\{{status="4xx",tenant="{tenant.id}"\}} 1\.0$'
    assert re.search(ok, text, re.M) and re.search(refused, text, re.M), text[-3000:]
    assert re.search(
        rf'^knowmind_tenant_recall_seconds_count\{{tenant="{tenant.id}"\}} 1\.0$', text, re.M
    )
    with pytest.raises(SettingsError, match="KNOWMIND_METRICS_TENANT_LABEL"):
        Settings.from_env({"KNOWMIND_METRICS_TENANT_LABEL": "yes"})
