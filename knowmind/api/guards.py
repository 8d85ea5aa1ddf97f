"""Bearer-token authentication and scope checks, declared per handler via ``opt={"scope": ...}``
(and ``"tenant_wide": True`` where the handler changes what the whole tenant shares: refused
to a token bound to one end user).

The checks themselves are ``knowmind.services.access.AccessControl`` (shared with MCP); this
guard only turns a refusal into Litestar's 401, 403 or 429 (with ``Retry-After``).
"""

from __future__ import annotations

import math
from typing import Any, cast

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import (
    HTTPException,
    NotAuthorizedException,
    PermissionDeniedException,
    TooManyRequestsException,
)
from litestar.handlers.base import BaseRouteHandler

from knowmind.services.access import AccessControl, AccessRefused, Caller
from knowmind.services.auth import Principal, user_bound_refusal

__all__ = ["TENANT_WRITE", "auth_guard", "caller_of", "provide_principal", "retry_after"]

#: A handler's ``opt`` where it writes what the whole tenant shares (documents, the graph):
#: write scope, refused to a token bound to one end user.
TENANT_WRITE: dict[str, Any] = {"scope": "write", "tenant_wide": True}

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="knowmind"'}


def caller_of(connection: ASGIConnection[Any, Any, Any, Any], access: AccessControl) -> Caller:
    """The connection's peer and ``X-Forwarded-For`` (believed only from a trusted proxy)."""
    peer = connection.client.host if connection.client else None
    return access.caller(peer, connection.headers.getall("x-forwarded-for", []))


def retry_after(seconds: float) -> dict[str, str]:
    return {"Retry-After": str(max(1, math.ceil(seconds)))}


async def auth_guard(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    needed = handler.opt.get("scope")
    if needed is None:
        return
    access: AccessControl = connection.app.state.access  # set by the app's lifespan
    try:
        principal = await access.admit(
            connection.headers.get("authorization"), caller_of(connection, access), needed
        )
    except AccessRefused as refused:
        raise _http_error(refused) from None
    if handler.opt.get("tenant_wide"):  # documents, the graph, settings: not a user's own
        refusal = user_bound_refusal(principal)
        if refusal is not None:
            raise PermissionDeniedException(refusal)
    connection.state.principal = principal


def _http_error(refused: AccessRefused) -> HTTPException:
    if refused.status == 401:
        return NotAuthorizedException(refused.detail, headers=_CHALLENGE)
    if refused.status == 403:
        return PermissionDeniedException(refused.detail)
    return TooManyRequestsException(refused.detail, headers=retry_after(refused.retry_after_s))


def provide_principal(request: Request[Any, Any, Any]) -> Principal:
    return cast(Principal, request.state.principal)  # set by auth_guard; State is untyped
