"""Where a recall's time goes: the server process's CPU and PostgreSQL's time per statement
(``pg_stat_statements``), over one pass of the questions by one client with cached query
embeddings — the work that bounds what 8 clients can get out of the cores.

``python -m benchmark.scale --statements``: the embedded server then loads
``pg_stat_statements``; an external one must have it in ``shared_preload_libraries`` (else the
profile says why it is missing). Statement texts are PostgreSQL's normalised ones (constants
replaced by ``$n``). The times inside PostgreSQL are wall time per statement: with one client
and nothing else running, close to its CPU time.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from knowmind.runtime import Runtime
from knowmind.services.auth import Principal

__all__ = ["PRELOAD_OPTIONS", "TOP_STATEMENTS", "profile_lines", "recall_profile"]

PRELOAD_OPTIONS = {
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track_planning": "on",
}
TOP_STATEMENTS = 12
_STATEMENT_CHARS = 200
# the recall's statements: those the app role ran in this database (the owner runs the reset
# and this read)
_STATEMENTS_SQL = (
    "SELECT query, calls, total_exec_time, total_plan_time FROM pg_stat_statements "
    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND userid = (SELECT oid FROM pg_roles WHERE rolname = :app_role)"
)

Measure = Callable[[Runtime, Principal, list[str], int], Awaitable[dict[str, Any]]]


async def _reset(runtime: Runtime) -> str | None:
    """Start counting afresh; why that is impossible here, or None."""
    try:
        async with runtime.database.db.owner_tx() as conn:
            await conn.execute(text("CREATE EXTENSION IF NOT EXISTS pg_stat_statements"))
            await conn.execute(text("SELECT pg_stat_statements_reset()"))
    except DBAPIError as exc:
        return f"pg_stat_statements is not available: {str(exc.orig).splitlines()[0]}"
    return None


async def recall_profile(
    runtime: Runtime, who: Principal, queries: list[str], measure: Measure
) -> dict[str, Any]:
    """One 1-client pass over ``queries`` (``measure``: the benchmark's own), profiled."""
    if not queries:
        return {"error": "no questions to ask"}
    problem = await _reset(runtime)
    if problem is not None:
        return {"error": problem}
    started = time.process_time()
    result = await measure(runtime, who, queries, 1)
    cpu_s = time.process_time() - started
    async with runtime.database.db.owner_tx() as conn:
        app_role = runtime.database.db.app.url.username
        rows = (await conn.execute(text(_STATEMENTS_SQL), {"app_role": app_role})).all()
    n = result["requests"]
    statements = sorted(rows, key=lambda r: -(r.total_exec_time + r.total_plan_time))
    return {
        "recalls": n,
        "p50_ms": result["p50_ms"],
        "python_cpu_ms_per_recall": round(cpu_s * 1000 / n, 2),
        "postgres_ms_per_recall": round(
            sum(r.total_exec_time + r.total_plan_time for r in rows) / n, 2
        ),
        "planning_ms_per_recall": round(sum(r.total_plan_time for r in rows) / n, 2),
        "statements_per_recall": round(sum(r.calls for r in rows) / n, 2),
        "top": [
            {
                "query": " ".join(r.query.split())[:_STATEMENT_CHARS],
                "calls_per_recall": round(r.calls / n, 2),
                "exec_ms_per_recall": round(r.total_exec_time / n, 3),
                "plan_ms_per_recall": round(r.total_plan_time / n, 3),
            }
            for r in statements[:TOP_STATEMENTS]
        ],
    }


def profile_lines(profile: dict[str, Any] | None, tenant_chunks: int) -> list[str]:
    """The report's section (none for a run without ``--statements``)."""
    if not profile:
        return []
    if "error" in profile:
        return [f"- Recall profile: not measured ({profile['error']})"]
    lines = [
        f"- Where a recall's time goes ({tenant_chunks:,}-chunk tenant, 1 client, cached query "
        f"embedding, {profile['recalls']} recalls, p50 {profile['p50_ms']} ms, "
        "pg_stat_statements loaded): the server process "
        f"{profile['python_cpu_ms_per_recall']} ms of CPU per recall; PostgreSQL "
        f"{profile['postgres_ms_per_recall']} ms in {profile['statements_per_recall']} "
        f"statements per recall, {profile['planning_ms_per_recall']} ms of it planning. "
        "The costliest statements:",
        "",
        "| statement | calls per recall | execution ms | planning ms |",
        "|---|---|---|---|",
    ]
    for s in profile["top"]:
        statement = s["query"][:90].replace("|", "\\|")
        lines.append(
            f"| `{statement}…` | {s['calls_per_recall']} | {s['exec_ms_per_recall']} | "
            f"{s['plan_ms_per_recall']} |"
        )
    return [*lines, ""]
