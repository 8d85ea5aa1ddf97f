"""Per-tenant quotas on queued background work: how many jobs a tenant may have waiting or
running, and how many bytes of payload (a large document's text) they may hold.

A write that would pass either is refused at once (429 with ``Retry-After``: ``OverloadedError``)
instead of queueing without bound; it writes nothing (the check runs in the write's own
transaction, after its rows, so a refusal rolls them back). A tenant's write transactions take
the tenant's write lock (``Database.tenant_tx(write=True)``), so the count each one sees
includes every committed write before it: concurrent writes cannot pass the quota together.
The services check once before the expensive part (embedding) and again in the transaction.
The jobs' own follow-up jobs (a stored document's extraction) are not checked: they take over
from the job that queued them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from uuid import UUID

from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.errors import OverloadedError
from knowmind.settings import IngestSettings
from knowmind.store import jobs as job_store

__all__ = ["JobQuota", "QuotaExceeded"]

# What a tenant's queue drains at, about, on a small host (for Retry-After only): a document's
# chunks are embedded at ~30 passages of ~1,000 characters per second, and the server shares
# that among the tenants with work queued; extraction jobs at a few dozen per second.
_DRAIN_BYTES_PER_S = 10_000
_DRAIN_JOBS_PER_S = 20
_MAX_RETRY_AFTER_S = 300.0


class QuotaExceeded(OverloadedError):
    """429: the tenant's queued background work is at its quota (``quota`` names which)."""

    def __init__(self, quota: str, message: str, retry_after_s: float) -> None:
        super().__init__(message, whole_server=False, retry_after_s=retry_after_s)
        self.quota = quota


def _megabytes(n: int) -> str:
    return f"{n / 1_048_576:.1f} MB"


@dataclass(frozen=True, slots=True)
class JobQuota:
    max_bytes: int  # 0: no limit
    max_jobs: int  # 0: no limit

    @classmethod
    def of(cls, ingest: IngestSettings) -> JobQuota:
        return cls(ingest.job_queue_bytes_per_tenant, ingest.job_queue_jobs_per_tenant)

    async def check(
        self,
        conn: AsyncConnection,
        tenant: UUID,
        *,
        jobs: int = 1,
        payload_bytes: int = 0,
        written: bool = False,
    ) -> None:
        """Refuse (``QuotaExceeded``) when the tenant's queue with ``jobs`` more jobs holding
        ``payload_bytes`` would pass a quota. ``written``: they are in this transaction's rows
        already (counted by the query). A job larger than the whole byte quota is admitted
        into an otherwise empty queue (it could never be otherwise)."""
        if self.max_bytes <= 0 and self.max_jobs <= 0:
            return
        queued = await job_store.queued_work(conn, tenant)
        total_jobs = queued.jobs + (0 if written else jobs)
        total_bytes = queued.payload_bytes + (0 if written else payload_bytes)
        if 0 < self.max_jobs < total_jobs and total_jobs > jobs:
            excess = total_jobs - self.max_jobs
            raise QuotaExceeded(
                "jobs",
                f"this tenant's background job quota is used up: {total_jobs - jobs} jobs "
                f"waiting or running, at most {self.max_jobs} "
                "(KNOWMIND_JOB_QUEUE_JOBS_PER_TENANT); retry after the Retry-After seconds",
                _retry_after(excess / _DRAIN_JOBS_PER_S),
            )
        if 0 < self.max_bytes < total_bytes and total_bytes > payload_bytes:
            excess = total_bytes - self.max_bytes
            raise QuotaExceeded(
                "bytes",
                "this tenant's quota on queued background bytes is used up: "
                f"{_megabytes(total_bytes - payload_bytes)} queued and "
                f"{_megabytes(payload_bytes)} more asked for, at most "
                f"{_megabytes(self.max_bytes)} (KNOWMIND_JOB_QUEUE_BYTES_PER_TENANT); retry after "
                "the Retry-After seconds",
                _retry_after(excess / _DRAIN_BYTES_PER_S),
            )


def _retry_after(seconds: float) -> float:
    return float(min(_MAX_RETRY_AFTER_S, max(1, math.ceil(seconds))))
