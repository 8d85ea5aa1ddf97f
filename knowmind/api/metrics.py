"""``GET /metrics``: Prometheus text format, for the server admin token (the job backlog and
queue depth span every tenant, as on ``/health/detail``; Prometheus sends it with
``authorization: {credentials_file: …}``).

Requests are counted and timed by route *template* and status by Litestar's Prometheus
middleware with grouped paths (``/v1/memories/{memory_id}``, never an id); recall stages,
the embedding queue, the recall gate, the job backlog and the mirror lag come from
``knowmind.metrics``, the gauges read when scraped."""

from __future__ import annotations

from litestar import Controller, Response, get
from litestar.di import NamedDependency
from litestar.plugins.prometheus import PrometheusConfig
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from knowmind import metrics
from knowmind.runtime import Runtime
from knowmind.services.auth import SERVER_ADMIN
from knowmind.store.jobs import job_backlog
from knowmind.store.outbox import outbox_lag

__all__ = ["METRICS_CONFIG", "MetricsController"]

METRICS_CONFIG = PrometheusConfig(
    app_name="knowmind",
    prefix="knowmind",
    group_path=True,  # the route template, not the path: no ids (or tenants) in labels
    exclude=["/metrics"],
)


async def _refresh(runtime: Runtime) -> None:
    waiting = runtime.embedder.waiting_passages()
    metrics.EMBED_QUEUE_PASSAGES.set(sum(waiting.values()))
    metrics.EMBED_QUEUE_TENANTS.set(len(waiting))
    gate = runtime.recall.gate
    if gate is not None:
        metrics.RECALLS.labels(state="running").set(gate.running)
        metrics.RECALLS.labels(state="waiting").set(gate.waiting)
    try:
        async with runtime.db.owner_tx() as conn:
            backlog = await job_backlog(conn)
            pending, oldest = await outbox_lag(conn)
    except Exception:  # the database is down: the last values stand, /health says the rest
        return
    metrics.JOBS.labels(state="waiting").set(backlog["pending_jobs"])
    metrics.JOBS.labels(state="failed").set(backlog["failed_jobs"])
    metrics.MIRROR_PENDING_CHANGES.set(pending)
    metrics.MIRROR_OLDEST_CHANGE_SECONDS.set(oldest)


class MetricsController(Controller):
    path = "/metrics"

    @get("/", include_in_schema=False, opt={"scope": SERVER_ADMIN})
    async def scrape(self, runtime: NamedDependency[Runtime]) -> Response[bytes]:
        await _refresh(runtime)
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
