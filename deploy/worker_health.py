"""Health check of a ``knowmind worker`` container (compose healthcheck, Kubernetes exec probe).

Exit 0 when the container's main process is the worker and the database answers ``select 1``
as the app role (KNOWMIND_APP_DATABASE_URL, else KNOWMIND_DATABASE_URL) within 5 seconds.
What it cannot see: whether the job loop itself is making progress (the worker writes no
heartbeat); a stuck loop shows as a growing job backlog in GET /health/detail.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path


def _worker_is_main_process() -> bool:
    try:
        argv = Path("/proc/1/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"worker" in argv and any(part.endswith(b"knowmind") for part in argv)


async def _database_answers(url: str) -> bool:
    import asyncpg

    conn = await asyncpg.connect(url.replace("postgresql+asyncpg://", "postgresql://"), timeout=5)
    try:
        return bool(await conn.fetchval("select 1", timeout=5) == 1)
    finally:
        await conn.close()


def main() -> int:
    url = os.environ.get("KNOWMIND_APP_DATABASE_URL") or os.environ.get("KNOWMIND_DATABASE_URL")
    if not url:
        print("worker health: no KNOWMIND_DATABASE_URL", file=sys.stderr)
        return 1
    if not _worker_is_main_process():
        print("worker health: the main process is not `knowmind worker`", file=sys.stderr)
        return 1
    try:
        ok = asyncio.run(_database_answers(url))
    except Exception as exc:  # unreachable, refused, bad password: never print the URL
        print(f"worker health: database: {type(exc).__name__}", file=sys.stderr)
        return 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
