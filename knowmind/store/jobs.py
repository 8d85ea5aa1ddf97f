"""Background jobs (extraction, large documents, summary trees): enqueued in the writer's
transaction, claimed with ``FOR UPDATE SKIP LOCKED`` across tenants by the worker (owner
connection). A job that runs in steps records its ``progress`` and what its steps produced
(``job_parts``) as it goes; each tenant's queued work (jobs and payload bytes) is counted for
its quota."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.store.scalars import one_id

__all__ = [
    "JobRow",
    "JobStep",
    "QueuedWork",
    "claim_jobs",
    "enqueue_job",
    "extend_leases",
    "finish_job",
    "get_job",
    "hand_back",
    "job_parts",
    "payload_size",
    "put_job_part",
    "queued_work",
    "retry_or_fail_job",
    "save_progress",
    "still_running",
]

_COLUMNS = (
    "id, tenant_id, kind, payload, status, attempts, max_attempts, last_error, result, "
    "created_at, finished_at, progress"
)


class JobRow(msgspec.Struct, frozen=True):
    """A background job as the queue keeps it."""

    id: UUID
    tenant_id: UUID
    kind: str
    payload: dict[str, Any]
    status: str  # pending, running, done or failed
    attempts: int
    max_attempts: int
    last_error: str | None
    result: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    progress: dict[str, Any] | None = None  # a stepped job's progress so far


class JobStep(msgspec.Struct, frozen=True):
    """What one step of a job that runs in steps came to: ``done`` with the job's ``result``,
    or not yet, with the ``progress`` to record (the worker runs the next step later, after
    other tenants' turns)."""

    done: bool
    result: dict[str, Any] | None = None
    progress: dict[str, Any] | None = None


class QueuedWork(msgspec.Struct, frozen=True):
    """A tenant's jobs waiting or running, and the bytes of their payloads."""

    jobs: int
    payload_bytes: int


def payload_size(payload: dict[str, Any]) -> int:
    """The bytes a payload counts for in its tenant's quota (its JSON)."""
    return len(msgspec.json.encode(payload))


async def enqueue_job(
    conn: AsyncConnection, tenant_id: UUID, kind: str, payload: dict[str, Any]
) -> UUID:
    encoded = msgspec.json.encode(payload)
    return await one_id(
        conn,
        text(
            "INSERT INTO jobs (tenant_id, kind, payload, payload_bytes) "
            "VALUES (:t, :k, CAST(:p AS jsonb), :n) RETURNING id"
        ),
        {"t": tenant_id, "k": kind, "p": encoded.decode(), "n": len(encoded)},
    )


async def queued_work(conn: AsyncConnection, tenant_id: UUID) -> QueuedWork:
    """What the tenant has queued (this transaction's own new jobs included): an index-only
    scan of ``jobs_queued``."""
    row = (
        await conn.execute(
            text(
                "SELECT count(*) AS jobs, coalesce(sum(payload_bytes), 0) AS bytes FROM jobs "
                "WHERE tenant_id = :t AND status IN ('pending', 'running')"
            ),
            {"t": tenant_id},
        )
    ).one()
    return QueuedWork(int(row.jobs), int(row.bytes))


async def get_job(conn: AsyncConnection, tenant_id: UUID, job_id: UUID) -> JobRow | None:
    row = (
        await conn.execute(
            text(f"SELECT {_COLUMNS} FROM jobs WHERE tenant_id = :t AND id = :id"),
            {"t": tenant_id, "id": job_id},
        )
    ).one_or_none()
    return JobRow(**row._mapping) if row else None


async def claim_jobs(
    conn: AsyncConnection,
    kinds: list[str],
    limit: int,
    lease_seconds: int,
    *,
    skip_tenants: Collection[UUID] = (),
    per_tenant: int | None = None,
) -> list[JobRow]:
    """Take due jobs of the given kinds (and jobs whose worker died: lease expired), the
    tenants taking turns: each tenant's oldest due job first, then each one's second, ... so a
    tenant with a thousand jobs queued does not hold back another tenant's one.
    ``skip_tenants``: tenants whose jobs are not taken now (the worker holds one already);
    ``per_tenant``: at most this many of one tenant's jobs."""
    rows = await conn.execute(
        text(
            "UPDATE jobs SET status = 'running', attempts = attempts + 1, "
            "locked_until = now() + make_interval(secs => :lease) "
            "WHERE (tenant_id, id) IN (SELECT j.tenant_id, j.id FROM jobs j JOIN ("
            " SELECT tenant_id, id, run_after, row_number() OVER"
            " (PARTITION BY tenant_id ORDER BY run_after, id) AS turn"
            " FROM jobs WHERE kind = ANY(:kinds) AND NOT tenant_id = ANY(:skip)"
            " AND ((status = 'pending' AND run_after <= now()) OR"
            " (status = 'running' AND locked_until < now()))"
            ") AS due ON due.tenant_id = j.tenant_id AND due.id = j.id"
            # re-checked on the locked row: a job another worker claimed meanwhile is skipped
            " WHERE ((j.status = 'pending' AND j.run_after <= now())"
            " OR (j.status = 'running' AND j.locked_until < now())) AND due.turn <= :turns"
            " ORDER BY due.turn, due.run_after LIMIT :limit FOR UPDATE OF j SKIP LOCKED) "
            f"RETURNING {_COLUMNS}"
        ),
        {
            "limit": limit,
            "lease": lease_seconds,
            "kinds": kinds,
            "skip": list(skip_tenants),
            "turns": per_tenant if per_tenant is not None else limit,
        },
    )
    return [JobRow(**r._mapping) for r in rows]


async def still_running(
    conn: AsyncConnection, jobs: Collection[tuple[UUID, UUID]]
) -> set[tuple[UUID, UUID]]:
    """Which of these jobs (tenant id, job id) are still there and running: the others were
    cancelled (erased with their tenant, document or memory) or taken over."""
    if not jobs:
        return set()
    rows = await conn.execute(
        text(
            "SELECT tenant_id, id FROM jobs WHERE status = 'running' AND (tenant_id, id) IN "
            "(SELECT * FROM unnest(CAST(:tenants AS uuid[]), CAST(:ids AS uuid[])))"
        ),
        {"tenants": [t for t, _ in jobs], "ids": [i for _, i in jobs]},
    )
    return {(r.tenant_id, r.id) for r in rows}


async def hand_back(conn: AsyncConnection, jobs: Collection[tuple[UUID, UUID]]) -> int:
    """A stopping worker's running jobs (tenant id, job id) are due again at once, with their
    progress; the claim that took them does not count as an attempt."""
    if not jobs:
        return 0
    result = await conn.execute(
        text(
            "UPDATE jobs SET status = 'pending', locked_until = NULL, run_after = now(), "
            "attempts = greatest(attempts - 1, 0) WHERE status = 'running' AND (tenant_id, id) IN "
            "(SELECT * FROM unnest(CAST(:tenants AS uuid[]), CAST(:ids AS uuid[])))"
        ),
        {"tenants": [t for t, _ in jobs], "ids": [i for _, i in jobs]},
    )
    return int(result.rowcount or 0)


async def save_progress(
    conn: AsyncConnection, tenant_id: UUID, job_id: UUID, progress: dict[str, Any]
) -> bool:
    """Record a stepped job's progress; False when the job is gone (cancelled)."""
    result = await conn.execute(
        text(
            "UPDATE jobs SET progress = CAST(:p AS jsonb) "
            "WHERE tenant_id = :t AND id = :id AND status = 'running'"
        ),
        {"t": tenant_id, "id": job_id, "p": msgspec.json.encode(progress).decode()},
    )
    return bool(result.rowcount)


async def put_job_part(
    conn: AsyncConnection, tenant_id: UUID, job_id: UUID, part: int, data: bytes
) -> None:
    """What step ``part`` of a job produced (kept until the job ends); a repeated step (after
    a crash) keeps the first. Fails when the job is gone (cancelled): nothing is written."""
    await conn.execute(
        text(
            "INSERT INTO job_parts (tenant_id, job_id, part, data) VALUES (:t, :j, :p, :d) "
            "ON CONFLICT DO NOTHING"
        ),
        {"t": tenant_id, "j": job_id, "p": part, "d": data},
    )


async def job_parts(conn: AsyncConnection, tenant_id: UUID, job_id: UUID) -> list[bytes]:
    """The parts a job's steps stored, in order (parts 0, 1, ... without a gap)."""
    rows = await conn.execute(
        text("SELECT part, data FROM job_parts WHERE tenant_id = :t AND job_id = :j ORDER BY part"),
        {"t": tenant_id, "j": job_id},
    )
    parts = []
    for expected, row in enumerate(rows):
        if row.part != expected:
            break
        parts.append(bytes(row.data))
    return parts


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


async def _forget_parts(conn: AsyncConnection, tenant_id: UUID, job_id: UUID) -> None:
    await conn.execute(
        text("DELETE FROM job_parts WHERE tenant_id = :t AND job_id = :j"),
        {"t": tenant_id, "j": job_id},
    )


async def finish_job(
    conn: AsyncConnection, tenant_id: UUID, job_id: UUID, result: dict[str, Any]
) -> None:
    """Done (a job that is gone, cancelled meanwhile, stays gone)."""
    await conn.execute(
        text(
            "UPDATE jobs SET status = 'done', result = CAST(:r AS jsonb), finished_at = now(), "
            f"locked_until = NULL, last_error = NULL, {_FORGET_CONTENT} "
            "WHERE tenant_id = :t AND id = :id"
        ),
        {"t": tenant_id, "id": job_id, "r": msgspec.json.encode(result).decode()},
    )
    await _forget_parts(conn, tenant_id, job_id)


async def retry_or_fail_job(
    conn: AsyncConnection,
    tenant_id: UUID,
    job_id: UUID,
    error: str,
    backoff_seconds: float,
    *,
    final: bool = False,
) -> str | None:
    """Back off and retry, or give up after ``max_attempts`` (at once when ``final``: the
    error would recur); returns the new status (None: the job is gone, cancelled). A retry
    resumes from the job's progress; a failed job forgets its parts."""
    status = await conn.scalar(
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
    if status == "failed":
        await _forget_parts(conn, tenant_id, job_id)
    return None if status is None else str(status)


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
