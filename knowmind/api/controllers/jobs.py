"""Background job status: ``GET /v1/jobs/{id}``."""

from __future__ import annotations

from uuid import UUID

import msgspec
from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import FromPath

from knowmind.contract.responses import JobOut
from knowmind.services.auth import Principal
from knowmind.services.jobs import JobRow, JobService

__all__ = ["JobController", "job_out"]


def job_out(row: JobRow) -> JobOut:
    return msgspec.convert(row, JobOut, from_attributes=True)


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
        return job_out(await jobs.get(principal, job_id))
