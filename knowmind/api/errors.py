"""Map errors to JSON responses: 422 for every input problem, naming the field."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import asyncpg  # type: ignore[import-untyped]
import structlog
from litestar import Request, Response
from litestar.exceptions import HTTPException, SerializationException, ValidationException
from litestar.status_codes import (
    HTTP_422_UNPROCESSABLE_ENTITY,
    HTTP_500_INTERNAL_SERVER_ERROR,
    HTTP_503_SERVICE_UNAVAILABLE,
)
from sqlalchemy.exc import DBAPIError

from knowmind.errors import ConflictError, InvalidInputError, KnowmindError, OverloadedError
from knowmind.models.llm import LLMUnavailableError

__all__ = ["error_response", "exception_handlers", "field_of_message"]

log = structlog.get_logger(__name__)
_MSGSPEC_PATH = re.compile(r" - at `\$\.?([^`]*)`")
_MISSING_FIELD = re.compile(r"(?:missing required|unknown) field `([^`]+)`")


def _body(status: int, detail: str, **extra: Any) -> Response[dict[str, Any]]:
    return Response({"status_code": status, "detail": detail, **extra}, status_code=status)


def field_of_message(message: str) -> tuple[str, str]:
    """(field path, message without it) from msgspec's 'Expected `int` - at `$.k`' (a missing
    or unknown field's path ends in its name)."""
    at = _MSGSPEC_PATH.search(message)
    path = at.group(1) if at else ""
    missing = _MISSING_FIELD.search(message)
    if missing:
        path = f"{path}.{missing.group(1)}" if path else missing.group(1)
    return path, _MSGSPEC_PATH.sub("", message)


def _field_of(error: ValidationException) -> tuple[str, str]:
    """Litestar wraps msgspec's message ('Expected `int` <= 25 - at `$.k`') in ``extra``."""
    extras = error.extra if isinstance(error.extra, list) else []
    for item in extras:
        if isinstance(item, dict) and item.get("message"):
            path, message = field_of_message(str(item["message"]))
            key = item.get("key")
            if not path and key not in (None, "data"):
                path = str(key)
            return path or "body", message
    return "body", str(error.detail)


def on_validation_error(
    _: Request[Any, Any, Any], error: ValidationException
) -> Response[dict[str, Any]]:
    field, message = _field_of(error)
    return _body(HTTP_422_UNPROCESSABLE_ENTITY, f"{field}: {message}", field=field)


def on_knowmind_error(_: Request[Any, Any, Any], error: KnowmindError) -> Response[dict[str, Any]]:
    field = getattr(error, "field", None)
    if isinstance(error, ConflictError) and error.existing_id is not None:
        # the existing tenant's id, as a 201 would have it: a walkthrough runs twice
        return _body(error.status_code, str(error), field=field, id=str(error.existing_id))
    if isinstance(error, InvalidInputError | ConflictError) and field:
        return _body(error.status_code, str(error), field=field)
    response = _body(error.status_code, str(error))
    if isinstance(error, OverloadedError):
        response.headers["Retry-After"] = str(max(1, math.ceil(error.retry_after_s)))
    return response


def on_http_error(_: Request[Any, Any, Any], error: HTTPException) -> Response[dict[str, Any]]:
    if isinstance(error.__cause__, SerializationException):  # the body is not valid JSON
        detail = f"body: malformed JSON ({error.detail})"
        return _body(HTTP_422_UNPROCESSABLE_ENTITY, detail, field="body")
    response = _body(error.status_code, str(error.detail))
    if error.headers:
        response.headers.update(error.headers)
    return response


def on_unexpected_error(_: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    if _database_unavailable(error):
        log.warning("request.database_unavailable", error_type=type(error).__name__)
        response = _body(HTTP_503_SERVICE_UNAVAILABLE, "database unavailable; retry shortly")
        response.headers["Retry-After"] = "5"
        return response
    log.exception("request.unhandled_error", error_type=type(error).__name__)
    return _body(HTTP_500_INTERNAL_SERVER_ERROR, "internal server error")


_CONNECTION_ERRORS = (
    OSError,  # refused, reset
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.CannotConnectNowError,
    asyncpg.exceptions.AdminShutdownError,
    asyncpg.exceptions.CrashShutdownError,
    asyncpg.exceptions.InterfaceError,
)


def _database_unavailable(error: BaseException) -> bool:
    """A lost or refused database connection anywhere in the error's chain (the supervisor
    reconnects, or restarts the embedded server): 503, not 500."""
    seen = 0
    current: BaseException | None = error
    while current is not None and seen < 8:
        if isinstance(current, LLMUnavailableError):
            return False  # the language model's server, not the database
        if isinstance(current, _CONNECTION_ERRORS):
            return True
        if isinstance(current, DBAPIError) and current.connection_invalidated:
            return True
        current, seen = current.__cause__ or current.__context__, seen + 1
    return False


ErrorHandler = Callable[[Request[Any, Any, Any], Any], Response[dict[str, Any]]]

exception_handlers: dict[type[Exception], ErrorHandler] = {
    ValidationException: on_validation_error,
    KnowmindError: on_knowmind_error,
    HTTPException: on_http_error,
    Exception: on_unexpected_error,
}


def error_response(request: Request[Any, Any, Any], error: Exception) -> Response[dict[str, Any]]:
    """The response the handlers above give for ``error`` (most specific handler first)."""
    for kind, handler in exception_handlers.items():
        if isinstance(error, kind):
            return handler(request, error)
    return on_unexpected_error(request, error)
