"""Server administration: tenants and their tokens (server admin token only)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

import msgspec
from litestar import Controller, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.response import Stream
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_204_NO_CONTENT

from knowmind.api.schemas import (
    AgentIdQuery,
    OccurredAfterQuery,
    OccurredBeforeQuery,
    SessionIdQuery,
    TenantIn,
    TokenIn,
    UserIdPath,
    UserIdQuery,
    query_instant,
    scope_id,
)
from knowmind.contract.responses import TenantOut, TokenOut
from knowmind.services.admin import AdminService, IssuedToken, TenantRow
from knowmind.services.audit import AuditRow, AuditService
from knowmind.services.auth import SERVER_ADMIN, Principal
from knowmind.services.erasure import ErasureService
from knowmind.services.memories import MemoryFilters
from knowmind.services.tenant_archive import TenantArchiveService
from knowmind.settings import Settings

__all__ = ["AdminController", "token_out"]

Who = NamedDependency[Principal]
BIGINT_MAX = 2**63 - 1  # audit ids are bigint


def token_out(issued: IssuedToken) -> TokenOut:
    """The token's row and the token itself (shown this once)."""
    return msgspec.convert(msgspec.structs.asdict(issued.row) | {"token": issued.token}, TokenOut)


def _tenant_out(row: TenantRow) -> TenantOut:
    return TenantOut(*msgspec.structs.astuple(row))


class AdminController(Controller):
    path = "/v1/admin"
    tags = ["admin"]
    opt = {"scope": SERVER_ADMIN}

    @post("/tenants", status_code=HTTP_201_CREATED, opt={"errors": (409,)})
    async def create_tenant(
        self,
        data: JSONBody[TenantIn],
        settings: NamedDependency[Settings],
        admin: NamedDependency[AdminService],
        principal: Who,
    ) -> TenantOut:
        """Create a tenant.

        Its `language` is a `pg_ts_config` name (default: the server's `KNOWMIND_DEFAULT_LANGUAGE`);
        409 when the name is taken. Server admin token."""
        language = data.language or settings.database.default_language
        return _tenant_out(await admin.create_tenant(data.name, language, principal))

    @get("/tenants")
    async def list_tenants(self, admin: NamedDependency[AdminService]) -> list[TenantOut]:
        """List the tenants.

        Every tenant with its language and embedding model. Server admin token."""
        return [_tenant_out(row) for row in await admin.list_tenants()]

    @post("/tenants/{tenant_id:uuid}/tokens", status_code=HTTP_201_CREATED)
    async def create_token(
        self,
        tenant_id: FromPath[UUID],
        data: JSONBody[TokenIn],
        admin: NamedDependency[AdminService],
        principal: Who,
    ) -> TokenOut:
        """Issue a token of a tenant.

        The token is shown once in the answer; only its SHA-256 is stored. With `user_id` it is
        bound to that end user. Server admin token."""
        issued = await admin.create_token(tenant_id, list(data.scopes), principal, data.user_id)
        return token_out(issued)

    @delete("/tenants/{tenant_id:uuid}", status_code=HTTP_200_OK)
    async def erase_tenant(
        self, tenant_id: FromPath[UUID], erasure: NamedDependency[ErasureService], principal: Who
    ) -> dict[str, Any]:
        """Erase a tenant.

        Erase a tenant and everything it owns; returns a receipt of what was removed, with
        the id of its audit entry."""
        return await erasure.erase_tenant(tenant_id, principal)

    @get(
        "/tenants/{tenant_id:uuid}/export",
        media_type="application/x-ndjson",
        opt={"errors": (404,)},
    )
    async def export_tenant(
        self,
        tenant_id: FromPath[UUID],
        tenant_archive: NamedDependency[TenantArchiveService],
        principal: Who,
        user_id: UserIdQuery = None,
        agent_id: AgentIdQuery = None,
        session_id: SessionIdQuery = None,
        occurred_after: OccurredAfterQuery = None,
        occurred_before: OccurredBeforeQuery = None,
    ) -> Stream:
        """Export a tenant as JSON Lines.

        The tenant as a JSON Lines archive (``knowmind.tenant-export`` version 1): a header,
        one line per row (memories, documents, chunks with their vectors, entities, mentions,
        edges, summaries, ontology, conversations), then a trailer with the count of each
        kind. One consistent snapshot; no tokens. ``knowmind tenant import`` restores it.

        With a filter (one end user's memories, an agent's, a session's, an event-time
        window), the archive holds those memories and only what hangs on them: their chunks,
        mentions, documents, the edges touching or drawn by them and the entities these name
        (a data-portability request of one user)."""
        named = (user_id, agent_id, session_id, occurred_after, occurred_before)
        filters = None
        if any(value is not None for value in named):
            filters = MemoryFilters(
                user_id=user_id,
                agent_id=agent_id,
                session_id=session_id,
                occurred_after=query_instant(occurred_after, "occurred_after"),
                occurred_before=query_instant(occurred_before, "occurred_before"),
            )
        lines = await tenant_archive.export(tenant_id, principal, filters)
        filename = f"knowmind-tenant-{tenant_id}.jsonl"
        return Stream(
            lines,
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    @delete(
        "/tenants/{tenant_id:uuid}/users/{user_id:str}",
        status_code=HTTP_200_OK,
        opt={"errors": (404,)},
    )
    async def erase_user(
        self,
        tenant_id: FromPath[UUID],
        user_id: UserIdPath,
        erasure: NamedDependency[ErasureService],
        principal: Who,
    ) -> dict[str, Any]:
        """Erase one end user of a tenant.

        Erase one end user of a tenant (a GDPR request): every memory of ``user_id`` with
        its chunks, mentions, edges, jobs and the entities only it named, and the answer
        threads of the tokens bound to that user; a receipt of counts, audited."""
        checked = scope_id(user_id, "user_id")
        return await erasure.erase_user(principal, checked, tenant_id)

    @delete("/tokens/{token_id:uuid}", status_code=HTTP_204_NO_CONTENT)
    async def revoke_token(
        self, token_id: FromPath[UUID], admin: NamedDependency[AdminService], principal: Who
    ) -> None:
        """Revoke a token.

        It is refused from the next request on; the revocation is audited. Server admin token."""
        await admin.revoke_token(token_id, principal)

    @get("/audit")
    async def audit(
        self,
        audit: NamedDependency[AuditService],
        tenant_id: Annotated[UUID | None, QueryParameter(description="one tenant's")] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
        before: Annotated[
            int | None, QueryParameter(ge=1, le=BIGINT_MAX, description="older than this id")
        ] = None,
    ) -> list[AuditRow]:
        """Read the audit log.

        Admin and erasure actions, newest first: who (token id, server admin or the local
        CLI), what, tenant and target ids, client address, counts. Append-only."""
        return await audit.entries(tenant_id, limit, before)
