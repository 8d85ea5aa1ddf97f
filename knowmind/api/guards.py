"""Bearer-token authentication and scope checks, declared per handler via ``opt={"scope": ...}``."""

from __future__ import annotations

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException, PermissionDeniedException
from litestar.handlers.base import BaseRouteHandler

from knowmind.services.auth import Principal, authenticate

__all__ = ["SERVER_ADMIN", "auth_guard", "provide_principal"]

SERVER_ADMIN = "server_admin"
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="knowmind"'}


async def auth_guard(connection: ASGIConnection, handler: BaseRouteHandler) -> None:
    needed = handler.opt.get("scope")
    if needed is None:
        return
    header = connection.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise NotAuthorizedException("missing bearer token", headers=_CHALLENGE)
    runtime = connection.app.state.runtime
    principal = await authenticate(runtime.db, token.strip(), runtime.settings.admin_token)
    if principal is None:
        raise NotAuthorizedException("invalid or revoked token", headers=_CHALLENGE)
    _check_scope(principal, needed)
    connection.state.principal = principal


def _check_scope(principal: Principal, needed: str) -> None:
    if needed == SERVER_ADMIN:
        if not principal.is_server_admin:
            raise PermissionDeniedException("this endpoint needs the server admin token")
        return
    if principal.is_server_admin:
        raise PermissionDeniedException("the admin token manages tenants; use a tenant token")
    if not principal.allows(needed):
        raise PermissionDeniedException(f"token lacks the {needed!r} scope")


def provide_principal(request: Request) -> Principal:
    return request.state.principal
