"""Remember, read, list and delete memories."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from litestar import Controller, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from litestar.status_codes import HTTP_200_OK, HTTP_201_CREATED, HTTP_204_NO_CONTENT

from knowmind.api.history_schemas import history_out
from knowmind.api.outputs import memory_out, remembered
from knowmind.api.schemas import (
    AgentIdQuery,
    MemoryIn,
    OccurredAfterQuery,
    OccurredBeforeQuery,
    SessionIdQuery,
    SupersedeIn,
    UserIdQuery,
    memory_draft,
    query_instant,
)
from knowmind.contract.responses import (
    JobRef,
    MemoryHistoryOut,
    MemoryList,
    MemoryOut,
    RememberOut,
)
from knowmind.services.auth import Principal
from knowmind.services.erasure import ErasureService
from knowmind.services.graph import GraphService
from knowmind.services.jobs import JobService
from knowmind.services.memories import MemoryFilters, MemoryService

__all__ = ["MemoryController"]


class MemoryController(Controller):
    path = "/v1/memories"
    tags = ["memories"]

    @post(
        "/",
        opt={
            "scope": "write",
            "also": {200: "unchanged: this content is stored already (the stored one is returned)"},
        },
    )
    async def remember(
        self,
        data: JSONBody[MemoryIn],
        memories: NamedDependency[MemoryService],
        jobs: NamedDependency[JobService],
        principal: NamedDependency[Principal],
        wait: Annotated[
            bool,
            QueryParameter(
                description="block until extraction is done, at most KNOWMIND_WAIT_TIMEOUT_SECONDS "
                "(10 s by default): then `job.status` is still `pending` or `running`"
            ),
        ] = False,
    ) -> Response[RememberOut]:
        """Store a memory. Extraction runs in the background (poll ``GET /v1/jobs/{job_id}``)
        unless ``?wait=true``: the answer then waits for it, but no longer than the server's
        wait timeout; a job not finished by then is answered as it stands (``job.status``
        ``pending`` or ``running``)."""
        draft = memory_draft(data)
        done = await memories.remember(principal, draft)
        job = None
        if wait and done.job_id is not None:
            row = await jobs.wait_for_job(principal, done.job_id)
            job = JobRef(id=row.id, status=row.status, result=row.result, last_error=row.last_error)
        status = HTTP_201_CREATED if done.status == "created" else HTTP_200_OK
        body = RememberOut(**remembered(done), job=job)
        return Response(body, status_code=status)

    @get("/{memory_id:uuid}", opt={"scope": "read"})
    async def get_memory(
        self,
        memory_id: FromPath[UUID],
        memories: NamedDependency[MemoryService],
        principal: NamedDependency[Principal],
    ) -> MemoryOut:
        """Read one memory.

        With its scopes, event time, valid time and the number of its chunks; 404 for an id the
        token may not read."""
        return memory_out(await memories.get(principal, memory_id))

    @get("/", opt={"scope": "read"})
    async def list_memories(
        self,
        memories: NamedDependency[MemoryService],
        principal: NamedDependency[Principal],
        limit: Annotated[int, QueryParameter(ge=1, le=100)] = 20,
        cursor: Annotated[str | None, QueryParameter(max_length=200)] = None,
        user_id: UserIdQuery = None,
        agent_id: AgentIdQuery = None,
        session_id: SessionIdQuery = None,
        occurred_after: OccurredAfterQuery = None,
        occurred_before: OccurredBeforeQuery = None,
        memory_type: Annotated[
            str | None, QueryParameter(description="of this type", max_length=40)
        ] = None,
        tag: Annotated[
            list[str] | None,
            QueryParameter(description="carrying this tag (repeat it: every one)", max_items=10),
        ] = None,
        source: Annotated[
            str | None, QueryParameter(description="from this source", max_length=500)
        ] = None,
        speaker: Annotated[
            str | None, QueryParameter(description="said by this speaker", max_length=300)
        ] = None,
    ) -> MemoryList:
        """List memories.

        Newest stored first; the filters (all optional, each narrowing the list) keep the
        memories of one type, source, speaker or set of tags, of one user, agent or session,
        or of an event-time window (ISO 8601, UTC when no offset)."""
        filters = MemoryFilters(
            memory_type=memory_type,
            tags=list(tag or ()),
            source=source,
            speaker=speaker,
            user_id=user_id,
            agent_id=agent_id,
            session_id=session_id,
            occurred_after=query_instant(occurred_after, "occurred_after"),
            occurred_before=query_instant(occurred_before, "occurred_before"),
        )
        rows, next_cursor = await memories.list_recent(principal, limit, cursor, filters)
        return MemoryList(items=[memory_out(r) for r in rows], next_cursor=next_cursor)

    @get("/{memory_id:uuid}/history", opt={"scope": "read"})
    async def history(
        self,
        memory_id: FromPath[UUID],
        graph: NamedDependency[GraphService],
        principal: NamedDependency[Principal],
    ) -> MemoryHistoryOut:
        """A memory's history.

        The memory's supersessions (``update_fact``, or automatic: a single-valued fact it
        stated changed, e.g. "lives in") and automatic fact updates: who, what, when."""
        return history_out(await graph.memory_history(principal, memory_id))

    @delete(
        "/{memory_id:uuid}",
        opt={"scope": "write", "also": {204: "deleted (without erase=true: no receipt)"}},
        status_code=HTTP_200_OK,
    )
    async def delete_memory(
        self,
        memory_id: FromPath[UUID],
        erasure: NamedDependency[ErasureService],
        memories: NamedDependency[MemoryService],
        principal: NamedDependency[Principal],
        erase: Annotated[bool, QueryParameter(description="GDPR erasure with receipt")] = False,
    ) -> Response[Any]:
        """Delete a memory.

        Delete a memory and its chunks; ``?erase=true`` removes every trace (mentions,
        edges, entities only it referred to, pending jobs, the mirror) and returns a receipt."""
        if erase:
            return Response(await erasure.erase_memory(principal, memory_id))
        await memories.delete(principal, memory_id)
        return Response(None, status_code=HTTP_204_NO_CONTENT)

    @post(
        "/{memory_id:uuid}/supersede",
        opt={"scope": "write", "errors": (409,)},
        status_code=HTTP_201_CREATED,
    )
    async def supersede(
        self,
        memory_id: FromPath[UUID],
        data: JSONBody[SupersedeIn],
        memories: NamedDependency[MemoryService],
        principal: NamedDependency[Principal],
    ) -> RememberOut:
        """Update a fact (supersede a memory).

        update_fact: the old memory stops being valid now; a new one replaces it."""
        done = await memories.supersede(
            principal, memory_id, data.new_title, data.new_content, data.update_reason
        )
        return RememberOut(**remembered(done))
