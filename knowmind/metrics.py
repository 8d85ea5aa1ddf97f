"""The process's Prometheus metrics (``GET /metrics`` renders them: api/metrics.py). Labels
name routes, stages and states, never a token or content — and a tenant only when the operator
opts in (``KNOWMIND_METRICS_TENANT_LABEL=on``: two per-tenant series, requests by status class
and recall latency, labelled with the tenant's id, never its name)."""

from __future__ import annotations

from collections.abc import Mapping
from uuid import UUID

from prometheus_client import Counter, Gauge, Histogram

__all__ = [
    "EMBED_QUEUE_PASSAGES",
    "EMBED_QUEUE_TENANTS",
    "JOBS",
    "MIRROR_OLDEST_CHANGE_SECONDS",
    "MIRROR_PENDING_CHANGES",
    "RECALLS",
    "enable_tenant_label",
    "observe_recall_timings",
    "observe_tenant_request",
]

_STAGE_SECONDS = Histogram(
    "knowmind_recall_stage_seconds",
    "Recall latency by stage (total: the whole recall)",
    ["stage"],
    buckets=(0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0),
)
EMBED_QUEUE_PASSAGES = Gauge("knowmind_embed_queue_passages", "Passages waiting for the embedder")
EMBED_QUEUE_TENANTS = Gauge("knowmind_embed_queue_tenants", "Tenants with passages waiting")
RECALLS = Gauge("knowmind_recalls", "Recalls running or waiting for the admission gate", ["state"])
JOBS = Gauge("knowmind_jobs", "Jobs of all tenants waiting or given up", ["state"])
MIRROR_PENDING_CHANGES = Gauge(
    "knowmind_mirror_pending_changes", "Graph changes not yet in the Neo4j mirror"
)
MIRROR_OLDEST_CHANGE_SECONDS = Gauge(
    "knowmind_mirror_oldest_change_seconds", "Age of the oldest change not yet mirrored"
)


_TENANT_REQUESTS = Counter(
    "knowmind_tenant_requests",
    "Requests by tenant and status class (opt-in: KNOWMIND_METRICS_TENANT_LABEL=on)",
    ["tenant", "status"],
)
_TENANT_RECALL_SECONDS = Histogram(
    "knowmind_tenant_recall_seconds",
    "Recall latency by tenant (opt-in: KNOWMIND_METRICS_TENANT_LABEL=on)",
    ["tenant"],
    buckets=(0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0),
)
_tenant_label = False


def enable_tenant_label(enabled: bool) -> None:
    """Whether the per-tenant series are recorded (off by default: tenant ids are data)."""
    global _tenant_label
    _tenant_label = enabled


def observe_recall_timings(timings_ms: Mapping[str, float], tenant: UUID | None = None) -> None:
    """A recall's stage timings (milliseconds, as the pipeline reports them)."""
    for stage, ms in timings_ms.items():
        _STAGE_SECONDS.labels(stage=stage).observe(ms / 1000.0)
    if _tenant_label and tenant is not None and "total" in timings_ms:
        _TENANT_RECALL_SECONDS.labels(tenant=str(tenant)).observe(timings_ms["total"] / 1000.0)


def observe_tenant_request(tenant: UUID | None, status: int) -> None:
    """One answered request of ``tenant`` (nothing without the opt-in or a tenant)."""
    if _tenant_label and tenant is not None:
        _TENANT_REQUESTS.labels(tenant=str(tenant), status=f"{status // 100}xx").inc()
