"""Background jobs (extraction): enqueued in the writer's transaction, claimed with
``FOR UPDATE SKIP LOCKED`` across tenants by the worker (owner connection)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.scalars import one_id, one_str

__all__ = [
    "JobRow",
    "claim_jobs",
    "enqueue_job",
    "extend_leases",
    "finish_job",
    "get_job",
    "retry_or_fail_job",
]

_COLUMNS = (
    "id, tenant_id, kind, payload, status, attempts, max_attempts, last_error, result, "
    "created_at, finished_at"
)


class JobRow(msgspec.Struct, frozen=True):
    id: UUID
    tenant_id: UUID
    kind: str
    payload: dict[str, Any]
    status: str
    attempts: int
    max_attempts: int
    last_error: str | None
    result: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None


async def enqueue_job(
    conn: AsyncConnection, tenant_id: UUID, kind: str, payload: dict[str, Any]
) -> UUID:
    return await one_id(
        conn,
        text(
            "INSERT INTO jobs (tenant_id, kind, payload) VALUES (:t, :k, CAST(:p AS jsonb)) "
            "RETURNING id"
        ),
        {"t": tenant_id, "k": kind, "p": msgspec.json.encode(payload).decode()},
    )


async def get_job(conn: AsyncConnection, tenant_id: UUID, job_id: UUID) -> JobRow | None:
    row = (
        await conn.execute(
            text(f"SELECT {_COLUMNS} FROM jobs WHERE tenant_id = :t AND id = :id"),
            {"t": tenant_id, "id": job_id},
        )
    ).one_or_none()
    return JobRow(**row._mapping) if row else None


async def claim_jobs(
    conn: AsyncConnection, kinds: list[str], limit: int, lease_seconds: int
) -> list[JobRow]:
    """Take due jobs of the given kinds (and jobs whose worker died: lease expired), the
    tenants taking turns: each tenant's oldest due job first, then each one's second, ... so a
    tenant with a thousand jobs queued does not hold back another tenant's one."""
    rows = await conn.execute(
        text(
            "UPDATE jobs SET status = 'running', attempts = attempts + 1, "
            "locked_until = now() + make_interval(secs => :lease) "
            "WHERE (tenant_id, id) IN (SELECT j.tenant_id, j.id FROM jobs j JOIN ("
            " SELECT tenant_id, id, run_after, row_number() OVER"
            " (PARTITION BY tenant_id ORDER BY run_after, id) AS turn"
            " FROM jobs WHERE kind = ANY(:kinds)"
            " AND ((status = 'pending' AND run_after <= now()) OR"
            " (status = 'running' AND locked_until < now()))"
            ") AS due ON due.tenant_id = j.tenant_id AND due.id = j.id"
            # re-checked on the locked row: a job another worker claimed meanwhile is skipped
            " WHERE (j.status = 'pending' AND j.run_after <= now())"
            " OR (j.status = 'running' AND j.locked_until < now())"
            " ORDER BY due.turn, due.run_after LIMIT :limit FOR UPDATE OF j SKIP LOCKED) "
            f"RETURNING {_COLUMNS}"
        ),
        {"limit": limit, "lease": lease_seconds, "kinds": kinds},
    )
    return [JobRow(**r._mapping) for r in rows]


async def extend_leases(
    conn: AsyncConnection, jobs: list[tuple[UUID, UUID]], lease_seconds: float
) -> int:
    """A live worker's heartbeat: its running jobs (tenant id, job id) stay claimed for
    another ``lease_seconds``. Returns how many were extended."""
    if not jobs:
        return 0
    result = await conn.execute(
        text(
            "UPDATE jobs SET locked_until = now() + make_interval(secs => :lease) "
            "WHERE status = 'running' AND (tenant_id, id) IN "
            "(SELECT * FROM unnest(CAST(:tenants AS uuid[]), CAST(:ids AS uuid[])))"
        ),
        {"lease": lease_seconds, "tenants": [t for t, _ in jobs], "ids": [i for _, i in jobs]},
    )
    return int(result.rowcount or 0)


# A job whose payload carries content (a large document) keeps it only while it may still run:
# a finished job must not outlive an erasure with the text in it.
_FORGET_CONTENT = "payload = CASE WHEN payload ? 'content' THEN '{}'::jsonb ELSE payload END"


async def finish_job(
    conn: AsyncConnection, tenant_id: UUID, job_id: UUID, result: dict[str, Any]
) -> None:
    await conn.execute(
        text(
            "UPDATE jobs SET status = 'done', result = CAST(:r AS jsonb), finished_at = now(), "
            f"locked_until = NULL, last_error = NULL, {_FORGET_CONTENT} "
            "WHERE tenant_id = :t AND id = :id"
        ),
        {"t": tenant_id, "id": job_id, "r": msgspec.json.encode(result).decode()},
    )


async def retry_or_fail_job(
    conn: AsyncConnection,
    tenant_id: UUID,
    job_id: UUID,
    error: str,
    backoff_seconds: float,
    *,
    final: bool = False,
) -> str:
    """Back off and retry, or give up after ``max_attempts`` (at once when ``final``: the
    error would recur); returns the new status."""
    return await one_str(
        conn,
        text(
            "UPDATE jobs SET last_error = :e, locked_until = NULL, "
            "status = CASE WHEN attempts >= max_attempts OR :final THEN 'failed' "
            "ELSE 'pending' END, "
            "finished_at = CASE WHEN attempts >= max_attempts OR :final THEN now() END, "
            "run_after = now() + make_interval(secs => :b), "
            "payload = CASE WHEN (attempts >= max_attempts OR :final) AND payload ? 'content' "
            "THEN '{}'::jsonb ELSE payload END "
            "WHERE tenant_id = :t AND id = :id RETURNING status"
        ),
        {"t": tenant_id, "id": job_id, "e": error[:500], "b": backoff_seconds, "final": final},
    )


async def job_backlog(conn: AsyncConnection, tenant_id: UUID | None = None) -> dict[str, int]:
    """Jobs waiting, and jobs that gave up: of one tenant, or (owner connection) of all."""
    where = "" if tenant_id is None else " WHERE tenant_id = :t"
    row = (
        await conn.execute(
            text(
                "SELECT count(*) FILTER (WHERE status IN ('pending', 'running')) AS pending, "
                f"count(*) FILTER (WHERE status = 'failed') AS failed FROM jobs{where}"
            ),
            {"t": tenant_id},
        )
    ).one()
    return {"pending_jobs": int(row.pending), "failed_jobs": int(row.failed)}
