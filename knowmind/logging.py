"""structlog setup and the per-request access log (never tokens or memory content)."""

from __future__ import annotations

import logging
import sys
import time
import uuid
from typing import Any

import structlog
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send
from structlog.tracebacks import ExceptionDictTransformer

__all__ = ["RequestLogMiddleware", "configure_logging"]

_REQUEST_ID = "x-request-id"


def configure_logging(log_format: str = "auto", level: str = "info") -> None:
    as_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
    )
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            # Tracebacks without local variables: locals would carry queries and content.
            structlog.processors.ExceptionRenderer(ExceptionDictTransformer(show_locals=False))
            if as_json
            else structlog.dev.set_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr, force=True)


class RequestLogMiddleware:
    """One log line per HTTP request: id, tenant, route, status, latency."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.log = structlog.get_logger("knowmind.access")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await self.app(scope, receive, send)
            return
        request_id = _request_id(scope)
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [
                    *message.get("headers", []),
                    (_REQUEST_ID.encode(), request_id.encode()),
                ]
            await send(message)

        structlog.contextvars.bind_contextvars(request_id=request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            principal = scope.get("state", {}).get("principal")
            self.log.info(
                "request",
                method=scope.get("method"),
                route=scope.get("path_template", scope.get("path")),
                status=status,
                latency_ms=round((time.perf_counter() - started) * 1000, 2),
                tenant_id=str(principal.tenant_id) if principal and principal.tenant_id else None,
            )
            structlog.contextvars.unbind_contextvars("request_id")


def _request_id(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == _REQUEST_ID.encode():
            candidate = value.decode("latin-1")[:64]
            if candidate.replace("-", "").isalnum():
                return candidate
    return uuid.uuid4().hex
