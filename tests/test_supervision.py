"""Self-healing storage: the embedded PostgreSQL killed under a running server is restarted and
writes are served again without a process restart (no acknowledged write lost); a crashed
process's PostgreSQL is adopted and stopped by the next owner; a database that stays away makes
``/health`` unhealthy."""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

import pytest

from knowmind.db.embedded import EmbeddedPostgres
from knowmind.db.engine import Database
from knowmind.db.migrate import upgrade
from knowmind.runtime import Runtime
from knowmind.services.auth import Principal
from knowmind.services.memories import MemoryDraft
from knowmind.services.supervision import DatabaseSupervisor

pytestmark = pytest.mark.slow


def _postmaster_pid(server: EmbeddedPostgres) -> int:
    return int((server.pgdata / "postmaster.pid").read_text().splitlines()[0])


def test_a_crashed_owners_server_is_adopted_and_stopped(tmp_path):
    first = EmbeddedPostgres(tmp_path / "pgdata")
    first.start()
    try:
        beside = EmbeddedPostgres(tmp_path / "pgdata")  # e.g. `knowmind tenant create`
        beside.start()
        assert first.owned and not beside.owned
        beside.stop()
        assert first.accepts_connections()  # only the owner stops it
        first._release()  # the owner dies without stopping its server (kill -9)
        heir = EmbeddedPostgres(tmp_path / "pgdata")
        heir.start()
        assert heir.owned
        heir.stop()
        assert not heir.accepts_connections()
        assert not (tmp_path / "pgdata" / "postmaster.pid").exists()
    finally:
        first._started_here = False  # the heir stopped it (or the test failed before)
        first.stop()


async def test_a_killed_embedded_database_is_restarted_without_losing_writes(
    tmp_path, embedder, settings
):
    server = EmbeddedPostgres(tmp_path / "pgdata")
    url = server.start()
    try:
        await asyncio.to_thread(upgrade, url, embedder.model_id, embedder.dim)
        own = settings.with_overrides(database_url=url, app_database_url=None)
        runtime = await Runtime.start(own, embedder, server)
        runtime.database.supervisor.interval_s = 0.5
        runtime.start_supervision()
        try:
            tenant = await runtime.admin.admin.create_tenant("supervised", "german")
            who = Principal(tenant.id, frozenset({"write"}))
            acknowledged = await runtime.ingest.memories.remember(
                who, MemoryDraft(content="Vor dem Absturz gespeichert.")
            )
            os.kill(_postmaster_pid(server), signal.SIGKILL)
            killed_at = time.monotonic()
            stored = None
            while stored is None and time.monotonic() - killed_at < 30:
                try:
                    stored = await runtime.ingest.memories.remember(
                        who, MemoryDraft(content=f"Nach dem Absturz {uuid.uuid4()}.")
                    )
                except Exception:
                    await asyncio.sleep(0.5)
            assert stored is not None, runtime.database.supervisor.report
            # the server may take writes a moment before the supervisor's restart call returns
            counted_by = time.monotonic() + 10
            while runtime.database.supervisor.report.restarts < 1 and time.monotonic() < counted_by:
                await asyncio.sleep(0.1)
            assert runtime.database.supervisor.report.restarts >= 1
            listed = await runtime.ingest.memories.get(who, acknowledged.id)
            assert listed.content == "Vor dem Absturz gespeichert."
        finally:
            await runtime.close()
    finally:
        server.stop()


async def test_a_database_that_stays_away_makes_the_process_unhealthy(tmp_path):
    gone = f"postgresql+asyncpg://postgres@/postgres?host={tmp_path}"  # nobody listens there
    db = Database.connect(gone, None, 2)
    try:
        supervisor = DatabaseSupervisor(db, None, unhealthy_after_s=0.2)
        await supervisor.check_once()
        assert not supervisor.report.up and supervisor.healthy  # not yet: it may come back
        await asyncio.sleep(0.3)
        await supervisor.check_once()
        assert not supervisor.healthy
        assert supervisor.report.last_problem
    finally:
        await db.dispose()
