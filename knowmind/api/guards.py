"""Bearer-token authentication and scope checks, declared per handler via ``opt={"scope": ...}``."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, cast

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import (
    NotAuthorizedException,
    PermissionDeniedException,
    TooManyRequestsException,
)
from litestar.handlers.base import BaseRouteHandler

from knowmind.services.auth import (
    Principal,
    authenticate,
    bearer_token,
    scope_refusal,
)
from knowmind.services.limits import RequestLimits

__all__ = ["auth_guard", "provide_principal"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="knowmind"'}


async def auth_guard(
    connection: ASGIConnection[Any, Any, Any, Any], handler: BaseRouteHandler
) -> None:
    needed = handler.opt.get("scope")
    if needed is None:
        return
    token = bearer_token(connection.headers.get("authorization"))
    if token is None:
        raise NotAuthorizedException("missing bearer token", headers=_CHALLENGE)
    runtime = connection.app.state.runtime
    limits: RequestLimits = runtime.limits
    client = connection.client.host if connection.client else None
    address = client or "unknown"
    locked = limits.auth_failures.locked_for(address)
    if locked:
        raise _too_many("too many invalid tokens from this address", locked)
    principal = await authenticate(runtime.db, token, runtime.settings.server.admin_token)
    if principal is None:
        limits.auth_failures.failed(address)
        raise NotAuthorizedException("invalid or revoked token", headers=_CHALLENGE)
    wait = limits.requests.take(str(principal.token_id or "server-admin"))
    if wait:
        raise _too_many("request rate of this token exceeded", wait)
    refusal = scope_refusal(principal, needed)
    if refusal is not None:
        raise PermissionDeniedException(refusal)
    connection.state.principal = replace(principal, client=client)


def _too_many(detail: str, retry_after_s: float) -> TooManyRequestsException:
    return TooManyRequestsException(detail, headers={"Retry-After": str(math.ceil(retry_after_s))})


def provide_principal(request: Request[Any, Any, Any]) -> Principal:
    return cast(Principal, request.state.principal)  # set by auth_guard; State is untyped
