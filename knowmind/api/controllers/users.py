"""A tenant's own access management: tokens it mints for itself (bound to one of its end users,
or not) and the erasure of one end user (a GDPR request), with an admin-scope tenant token."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from litestar import Controller, delete, post
from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED

from knowmind.api.controllers.admin import token_out
from knowmind.api.schemas import TokenIn, UserIdPath, scope_id
from knowmind.contract.responses import TokenOut
from knowmind.errors import ForbiddenError
from knowmind.services.admin import AdminService
from knowmind.services.auth import Principal, tenant_of
from knowmind.services.erasure import ErasureService

__all__ = ["TenantAccessController"]


class TenantAccessController(Controller):
    path = "/v1"
    tags = ["access"]

    @post("/tokens", opt={"scope": "admin"}, status_code=HTTP_201_CREATED)
    async def create_token(
        self,
        data: JSONBody[TokenIn],
        admin: NamedDependency[AdminService],
        principal: NamedDependency[Principal],
    ) -> TokenOut:
        """Issue a token of the caller's tenant.

        A new token of the caller's tenant. With ``user_id`` it is bound to that end user:
        its writes are that user's whatever a body says, and it reads that user's memories and
        the tenant's shared ones (held to them in the database). A user-bound admin token
        mints tokens of its own user only."""
        user_id = data.user_id
        if principal.user_id is not None:
            if user_id not in (None, principal.user_id):
                raise ForbiddenError("a user-bound token mints tokens of its own user only")
            user_id = principal.user_id
        tenant = UUID(int=tenant_of(principal).int)  # the tenant itself, not a user scope
        issued = await admin.create_token(tenant, list(data.scopes), principal, user_id)
        return token_out(issued)

    @delete("/users/{user_id:str}", opt={"scope": "admin"}, status_code=HTTP_200_OK)
    async def erase_user(
        self,
        user_id: UserIdPath,
        erasure: NamedDependency[ErasureService],
        principal: NamedDependency[Principal],
    ) -> dict[str, Any]:
        """Erase one end user of the tenant.

        Erase one end user of the tenant (a GDPR request): every memory of ``user_id`` with
        its chunks, mentions, the edges it drew, its jobs and the entities only it named, and
        the answer threads of the tokens bound to that user. Returns a receipt of what was
        removed with the id of its audit entry. A user-bound admin token erases its own user
        only."""
        checked = scope_id(user_id, "user_id")
        return await erasure.erase_user(principal, checked)
