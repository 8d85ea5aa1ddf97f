"""Background job status: ``GET /v1/jobs/{id}``."""

from __future__ import annotations

from uuid import UUID

from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import FromPath

from knowmind.api.outputs import response
from knowmind.contract.responses import JobOut
from knowmind.services.auth import Principal
from knowmind.services.jobs import JobService

__all__ = ["JobController"]


class JobController(Controller):
    path = "/v1/jobs"
    tags = ["jobs"]

    @get("/{job_id:uuid}", opt={"scope": "read"})
    async def get_job(
        self,
        job_id: FromPath[UUID],
        jobs: NamedDependency[JobService],
        principal: NamedDependency[Principal],
    ) -> JobOut:
        """Read a background job.

        An extraction, a large document stored in steps, a summary tree: its status, attempts,
        progress and, once done, its result."""
        return response(await jobs.get(principal, job_id), JobOut)
