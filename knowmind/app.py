"""The application factory: ``create_app(settings)`` wires controllers, runtime and logging."""

from __future__ import annotations

from collections.abc import AsyncIterator
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
from knowmind.api.mcp import MCPController
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

__all__ = ["create_app"]


def _provide_runtime(state: State) -> Runtime:
    return cast(Runtime, state.runtime)  # set in create_app; State is untyped


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
        runtime.start_supervision()
        runtime.start_loading_reranker(freeze_heap=True)
        if settings.server.run_workers == "on":
            runtime.start_workers()
        try:
            yield
        finally:
            await runtime.close()

    app = Litestar(
        route_handlers=[
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
        ],
        lifespan=[lifespan],
        guards=[auth_guard, strict_body_guard],
        dependencies={
            "runtime": Provide(_provide_runtime, sync_to_thread=False),
            "principal": Provide(provide_principal, sync_to_thread=False),
        },
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
