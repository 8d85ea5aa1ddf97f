"""The application factory: ``create_app(settings)`` wires controllers, the runtime's services
and logging. Controllers declare the services they need by name (``memories:
NamedDependency[MemoryService]``); ``SERVICES`` says where the runtime holds each."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import cast

from litestar import Litestar
from litestar.datastructures import State
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig

from knowmind import __version__
from knowmind.api.controllers.admin import AdminController
from knowmind.api.controllers.answer import AnswerController
from knowmind.api.controllers.batch import BatchController
from knowmind.api.controllers.documents import DocumentController, KnowmindUploadController
from knowmind.api.controllers.graph import (
    EntityController,
    RelationController,
    SchemaController,
)
from knowmind.api.controllers.health import HealthController
from knowmind.api.controllers.jobs import JobController
from knowmind.api.controllers.memories import MemoryController
from knowmind.api.controllers.recall import RecallController
from knowmind.api.controllers.settings import SettingsController
from knowmind.api.controllers.turns import ConversationController
from knowmind.api.controllers.ui import UIController
from knowmind.api.controllers.users import TenantAccessController
from knowmind.api.errors import exception_handlers
from knowmind.api.guards import auth_guard, provide_principal
from knowmind.api.mcp import MCPController, provide_tools
from knowmind.api.metrics import METRICS_CONFIG, MetricsController
from knowmind.api.openapi import document_statuses
from knowmind.api.reference import ReferencePage, reference_router
from knowmind.api.strict_body import strict_body_guard
from knowmind.db.embedded import EmbeddedPostgres
from knowmind.logging import RequestLogMiddleware, configure_logging
from knowmind.metrics import enable_tenant_label
from knowmind.models.base import Embedder
from knowmind.runtime import Runtime, check_registered_names
from knowmind.settings import Settings

__all__ = ["SERVICES", "create_app"]

#: Every service a controller may declare, by name, and where the runtime holds it.
SERVICES: dict[str, Callable[[Runtime], object]] = {
    "access": lambda rt: rt.admin.access,
    "admin": lambda rt: rt.admin.admin,
    "answers": lambda rt: rt.answers.service,
    "audit": lambda rt: rt.admin.audit,
    "documents": lambda rt: rt.ingest.documents,
    "erasure": lambda rt: rt.admin.erasure,
    "graph": lambda rt: rt.graph.service,
    "health": lambda rt: rt.admin.health,
    "jobs": lambda rt: rt.ingest.jobs,
    "load": lambda rt: rt.admin.load,
    "memories": lambda rt: rt.ingest.memories,
    "recall": lambda rt: rt.recall.service,
    "supervisor": lambda rt: rt.database.supervisor,
    "tenant_archive": lambda rt: rt.admin.tenant_archive,
    "tenant_settings": lambda rt: rt.answers.tenant_settings,
}


def _provider(pick: Callable[[Runtime], object]) -> Provide:
    def provide(state: State) -> object:
        return pick(cast(Runtime, state.runtime))  # set by the lifespan; State is untyped

    return Provide(provide, sync_to_thread=False)


def _dependencies(settings: Settings) -> dict[str, Provide]:
    def provide_settings() -> Settings:
        return settings

    return {
        **{name: _provider(pick) for name, pick in SERVICES.items()},
        "settings": Provide(provide_settings, sync_to_thread=False),
        "tools": Provide(provide_tools, sync_to_thread=False),  # MCP's, from those above
        "principal": Provide(provide_principal, sync_to_thread=False),
    }


#: Every door of the server: REST controllers, MCP, metrics and the console.
ROUTE_HANDLERS = (
    HealthController,
    AdminController,
    MemoryController,
    BatchController,
    ConversationController,
    RecallController,
    EntityController,
    RelationController,
    SchemaController,
    JobController,
    MCPController,
    DocumentController,
    KnowmindUploadController,
    MetricsController,
    AnswerController,
    SettingsController,
    TenantAccessController,
    UIController,
)


def create_app(
    settings: Settings,
    embedder: Embedder | None = None,
    embedded: EmbeddedPostgres | None = None,
    query_embedder: Embedder | None = None,
) -> Litestar:
    """``settings.database.database_url`` must point at a migrated database (``knowmind serve``
    does it); ``embedded``: the embedded server it runs on, restarted if it dies."""
    check_registered_names(settings)  # a wrong name fails here, before the server starts
    configure_logging(settings.server.log_format, settings.server.log_level)
    enable_tenant_label(settings.server.metrics_tenant_label == "on")

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        runtime = await Runtime.start(settings, embedder, embedded, query_embedder)
        app.state.runtime = runtime
        app.state.access = runtime.admin.access  # the guard's (guards take no dependencies)
        runtime.start_supervision()
        runtime.start_loading_reranker(freeze_heap=True)
        if settings.server.run_workers == "on":
            runtime.start_workers()
        try:
            yield
        finally:
            await runtime.close()

    app = Litestar(
        route_handlers=list(ROUTE_HANDLERS),
        lifespan=[lifespan],
        guards=[auth_guard, strict_body_guard],
        dependencies=_dependencies(settings),
        exception_handlers=exception_handlers,  # type: ignore[arg-type]
        middleware=[RequestLogMiddleware, METRICS_CONFIG.middleware],
        request_max_body_size=settings.server.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title="knowmind",
            version=__version__,
            path="/schema",
            render_plugins=[ReferencePage()],  # rendered here: works offline
            openapi_router=reference_router(),  # with CSP and X-Frame-Options
        ),
        logging_config=None,
    )
    document_statuses(app)
    return app
