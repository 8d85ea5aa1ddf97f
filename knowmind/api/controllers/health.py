"""Liveness and readiness."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Response, get
from litestar.di import NamedDependency
from litestar.status_codes import HTTP_200_OK, HTTP_503_SERVICE_UNAVAILABLE

from knowmind import __version__
from knowmind.services.auth import SERVER_ADMIN, Principal
from knowmind.services.health import HealthService
from knowmind.services.supervision import DatabaseSupervisor

__all__ = ["HealthController"]


class HealthController(Controller):
    tags = ["health"]

    @get("/health")
    async def health(
        self, supervisor: NamedDependency[DatabaseSupervisor]
    ) -> Response[dict[str, Any]]:
        """Whether the process is alive.

        The process is alive and can recover: 503 once the database has been unreachable
        for a minute (the embedded one could not be restarted), so an orchestrator restarts
        the process; a shorter outage shows in ``/ready``."""
        report = supervisor.report
        body: dict[str, Any] = {"status": "ok", "version": __version__}
        if not report.up:
            body["database"] = {"status": "unreachable", "problem": report.last_problem}
        if supervisor.healthy:
            return Response(body, status_code=HTTP_200_OK)
        return Response(body | {"status": "unhealthy"}, status_code=HTTP_503_SERVICE_UNAVAILABLE)

    @get("/v1/capabilities")
    async def capabilities(self, health: NamedDependency[HealthService]) -> dict[str, Any]:
        """What this host can do.

        What is active on this host: embedder, reranker, graph backend, NER, stages."""
        return await health.capabilities()

    @get("/health/detail", opt={"scope": SERVER_ADMIN})
    async def health_detail(self, health: NamedDependency[HealthService]) -> dict[str, Any]:
        """The status of each component.

        A status per component: postgres, graph mirror, embedder, reranker, job worker
        (server admin token: the job backlog spans every tenant)."""
        return await health.health_detail()

    @get("/v1/stats", opt={"scope": "read"})
    async def stats(
        self, health: NamedDependency[HealthService], principal: NamedDependency[Principal]
    ) -> dict[str, Any]:
        """The tenant's counts.

        Counts for the caller's tenant: memories, documents, chunks, entities, edges, jobs,
        and the graph mirror's lag."""
        return await health.stats(principal)

    @get("/ready")
    async def ready(self, health: NamedDependency[HealthService]) -> Response[dict[str, Any]]:
        """Whether the server is ready to serve.

        Database reachable, schema at head, embedder (and reranker) loaded and warmed up."""
        checks = await health.readiness()
        ok = all(value == "ok" for value in checks.values())
        status = HTTP_200_OK if ok else HTTP_503_SERVICE_UNAVAILABLE
        # The graph mirror is reported, never a reason to be unready: PostgreSQL is the record.
        body = {
            "status": "ok" if ok else "unavailable",
            "checks": checks,
            "graph_mirror": await health.mirror_report(),
        }
        return Response(body, status_code=status)
