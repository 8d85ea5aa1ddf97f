"""structlog setup and the per-request access log (never tokens or memory content)."""

from __future__ import annotations

import logging
import sys
import time
import traceback
import uuid
from typing import Any

import structlog
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from knowmind.metrics import observe_tenant_request

__all__ = ["RequestLogMiddleware", "configure_logging", "log_processors"]

_REQUEST_ID = "x-request-id"


def configure_logging(log_format: str = "auto", level: str = "info") -> None:
    as_json = log_format == "json" or (log_format == "auto" and not sys.stderr.isatty())
    numeric = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    structlog.configure(
        processors=log_processors(as_json),
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=sys.stderr, force=True)


def log_processors(as_json: bool) -> list[Any]:
    renderer: Any = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)
    )
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _exception_without_values,
        renderer,
    ]


_MAX_CHAIN = 5
_MAX_FRAMES = 15


def _exception_without_values(_: Any, __: str, event: dict[str, Any]) -> dict[str, Any]:
    """Exceptions logged as their chain of types, SQLSTATEs and frames, never their messages
    or local variables: a database error quotes the value it refused (a recall query, a title),
    and locals carry queries and content. The type and the frames say where it went wrong."""
    exc_info = event.pop("exc_info", None)
    if exc_info is True:
        error = sys.exc_info()[1]
    elif isinstance(exc_info, BaseException):
        error = exc_info
    elif isinstance(exc_info, tuple):
        error = exc_info[1]
    else:
        return event
    chain: list[dict[str, Any]] = []
    while error is not None and len(chain) < _MAX_CHAIN:
        chain.append(_describe(error))
        error = error.__cause__ or error.__context__
    event["exception"] = chain
    return event


def _describe(error: BaseException) -> dict[str, Any]:
    frames = traceback.extract_tb(error.__traceback__)[-_MAX_FRAMES:]
    entry: dict[str, Any] = {
        "type": f"{type(error).__module__}.{type(error).__qualname__}",
        "frames": [f"{f.filename}:{f.lineno} {f.name}" for f in frames],
    }
    sqlstate = getattr(error, "sqlstate", None) or getattr(
        getattr(error, "orig", None), "sqlstate", None
    )
    if isinstance(sqlstate, str):
        entry["sqlstate"] = sqlstate
    if isinstance(error, OSError) and error.errno is not None:
        entry["errno"] = error.errno
    return entry


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
            observe_tenant_request(principal.tenant_id if principal else None, status)
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
