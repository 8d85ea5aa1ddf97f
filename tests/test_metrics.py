"""GET /metrics: Prometheus text with request counts and latencies by route template and
status, recall stage latencies, the embedding queue, jobs and mirror lag; no tenant, id or
content in any label."""

from __future__ import annotations

import re

from tests.conftest import ADMIN_HEADERS


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
    # nothing that names a tenant or a stored thing
    assert tenant.id not in text and memory_id not in text and "Kantine" not in text
