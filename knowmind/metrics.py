"""The process's Prometheus metrics (``GET /metrics`` renders them: api/metrics.py). Labels
name routes, stages and states, never a tenant, a token or content."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import Gauge, Histogram

__all__ = [
    "EMBED_QUEUE_PASSAGES",
    "EMBED_QUEUE_TENANTS",
    "JOBS",
    "MIRROR_OLDEST_CHANGE_SECONDS",
    "MIRROR_PENDING_CHANGES",
    "observe_recall_timings",
]

_STAGE_SECONDS = Histogram(
    "knowmind_recall_stage_seconds",
    "Recall latency by stage (total: the whole recall)",
    ["stage"],
    buckets=(0.002, 0.005, 0.01, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0),
)
EMBED_QUEUE_PASSAGES = Gauge("knowmind_embed_queue_passages", "Passages waiting for the embedder")
EMBED_QUEUE_TENANTS = Gauge("knowmind_embed_queue_tenants", "Tenants with passages waiting")
JOBS = Gauge("knowmind_jobs", "Jobs of all tenants waiting or given up", ["state"])
MIRROR_PENDING_CHANGES = Gauge(
    "knowmind_mirror_pending_changes", "Graph changes not yet in the Neo4j mirror"
)
MIRROR_OLDEST_CHANGE_SECONDS = Gauge(
    "knowmind_mirror_oldest_change_seconds", "Age of the oldest change not yet mirrored"
)


def observe_recall_timings(timings_ms: Mapping[str, float]) -> None:
    """A recall's stage timings (milliseconds, as the pipeline reports them)."""
    for stage, ms in timings_ms.items():
        _STAGE_SECONDS.labels(stage=stage).observe(ms / 1000.0)
