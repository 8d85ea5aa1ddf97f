"""Bearer-token authentication and scope checks, declared per handler via ``opt={"scope": ...}``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, cast

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from knowmind.services.auth import (
    Principal,
    authenticate,
    bearer_token,
    scope_refusal,
)

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
    principal = await authenticate(runtime.db, token, runtime.settings.server.admin_token)
    if principal is None:
        raise NotAuthorizedException("invalid or revoked token", headers=_CHALLENGE)
    refusal = scope_refusal(principal, needed)
    if refusal is not None:
        raise PermissionDeniedException(refusal)
    client = connection.client.host if connection.client else None
    connection.state.principal = replace(principal, client=client)


def provide_principal(request: Request[Any, Any, Any]) -> Principal:
    return cast(Principal, request.state.principal)  # set by auth_guard; State is untyped
