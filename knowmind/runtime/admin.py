"""The administration subsystem: tenants and tokens, every door's access control, erasure, the
audit log, tenant archives, and the reports on the process (health, load)."""

from __future__ import annotations

from dataclasses import dataclass

from knowmind.db.engine import Database
from knowmind.runtime.database import DatabaseParts
from knowmind.runtime.graph import GraphParts
from knowmind.runtime.models import ModelParts
from knowmind.runtime.recall import RecallParts
from knowmind.runtime.workers import JOBS_TASK, WorkerParts
from knowmind.services.access import AccessControl, TrustedProxies
from knowmind.services.admin import AdminService
from knowmind.services.audit import AuditService
from knowmind.services.erasure import ErasureService
from knowmind.services.health import HealthService, HostFacts
from knowmind.services.limits import RequestLimits
from knowmind.services.load import LoadService
from knowmind.services.tenant_archive import TenantArchiveService
from knowmind.settings import ServerSettings, Settings

__all__ = ["AdminParts", "build_admin"]


@dataclass(frozen=True, slots=True)
class AdminParts:
    admin: AdminService
    access: AccessControl  # every door's authentication, lockout, rate and scope
    erasure: ErasureService
    audit: AuditService
    tenant_archive: TenantArchiveService
    health: HealthService
    load: LoadService


def build_admin(
    settings: Settings,
    database: DatabaseParts,
    models: ModelParts,
    graph: GraphParts,
    recall: RecallParts,
    workers: WorkerParts,
) -> AdminParts:
    db, model_id, dim = database.db, models.embedder.model_id, models.embedder.dim
    return AdminParts(
        admin=AdminService(db, model_id, dim),
        access=_access(db, settings.server),
        erasure=ErasureService(
            db,
            graph.service,
            mirror_enabled=bool(settings.graph.neo4j_url),
            on_jobs_cancelled=workers.signal.cancel,  # the jobs it erases stop at once
        ),
        audit=AuditService(db),
        tenant_archive=TenantArchiveService(db, model_id, dim),
        health=HealthService(
            db,
            models.embedder,
            recall.pipeline,
            graph.reader,
            graph.mirror,
            _host_facts(settings, models),
            jobs_running=lambda: workers.background.running(JOBS_TASK),
            warmup=models.warmup,
        ),
        load=LoadService(db, models.embedder, recall.service.gate),
    )


def _access(db: Database, server: ServerSettings) -> AccessControl:
    limits = RequestLimits.of(
        server.rate_limit_per_second, server.rate_limit_burst, server.auth_failures_before_lockout
    )
    return AccessControl(db, server.admin_token, limits, TrustedProxies(server.trusted_proxies))


def _host_facts(settings: Settings, models: ModelParts) -> HostFacts:
    """What the health report says of this process's models and extractors."""
    llm = models.llm
    return HostFacts(
        settings.models.embedder,
        tuple(settings.ingest.extractor_list),
        llm_provider=llm.provider if llm else "none",
        llm_model=llm.model if llm else None,
        llm_configured=settings.models.llm_provider,
        llm_reason=models.llm_problem,
        sentence_vectors=settings.ingest.sentence_vectors == "on",
    )
