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
from knowmind.services.auth import SERVER_ADMIN
from knowmind.services.load import Load, LoadService

__all__ = ["METRICS_CONFIG", "MetricsController"]

METRICS_CONFIG = PrometheusConfig(
    app_name="knowmind",
    prefix="knowmind",
    group_path=True,  # the route template, not the path: no ids (or tenants) in labels
    exclude=["/metrics"],
)


def _refresh(load: Load) -> None:
    """The gauges from the service's reading (a database that did not answer leaves the last
    values of its gauges standing)."""
    metrics.EMBED_QUEUE_PASSAGES.set(load.queued_passages)
    metrics.EMBED_QUEUE_TENANTS.set(load.queued_tenants)
    if load.recalls is not None:
        running, waiting = load.recalls
        metrics.RECALLS.labels(state="running").set(running)
        metrics.RECALLS.labels(state="waiting").set(waiting)
    backlog = load.backlog
    if backlog is not None:
        metrics.JOBS.labels(state="waiting").set(backlog.pending_jobs)
        metrics.JOBS.labels(state="failed").set(backlog.failed_jobs)
        metrics.MIRROR_PENDING_CHANGES.set(backlog.mirror_pending)
        metrics.MIRROR_OLDEST_CHANGE_SECONDS.set(backlog.mirror_oldest_s)


class MetricsController(Controller):
    path = "/metrics"

    @get("/", include_in_schema=False, opt={"scope": SERVER_ADMIN})
    async def scrape(self, load: NamedDependency[LoadService]) -> Response[bytes]:
        _refresh(await load.load())
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)
