"""The write pools ping a connection only after it sat idle: a busy pool spends no round trips
on pings, and a connection that died while idle is replaced before anyone uses it."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import text

import knowmind.db.engine as engine_module
from knowmind.db.engine import make_engine


async def _backend_pid(engine) -> int:
    async with engine.connect() as conn:
        return int(await conn.scalar(text("SELECT pg_backend_pid()")))


async def _terminate(admin, pid: int) -> None:
    """End a backend and wait until it is gone."""
    async with admin.connect() as conn:
        assert await conn.scalar(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        for _ in range(500):  # up to 10 s: a busy 2-core machine can take a while
            query = "SELECT count(*) FROM pg_stat_activity WHERE pid = :pid"
            if not await conn.scalar(text(query), {"pid": pid}):
                return
            await asyncio.sleep(0.02)
    raise AssertionError(f"backend {pid} still there")


async def _count_pings(engine, monkeypatch) -> list[int]:
    """Counts the driver-level pings of this pool's one connection (instrumentation, not a
    double: the real ping still runs; other pools in the process are not counted)."""
    pings: list[int] = []
    async with engine.connect() as conn:
        raw = await conn.get_raw_connection()
        ours = raw.dbapi_connection
    adapter_class = type(ours)
    original = adapter_class.ping

    def counted(self) -> None:
        if self is ours:
            pings.append(1)
        original(self)

    monkeypatch.setattr(adapter_class, "ping", counted)
    return pings


async def test_a_busy_pool_does_not_ping(database_url, monkeypatch):
    engine = make_engine(database_url, 1)
    try:
        pings = await _count_pings(engine, monkeypatch)
        for _ in range(5):
            await _backend_pid(engine)
        assert pings == []
        monkeypatch.setattr(engine_module, "PING_WHEN_IDLE_S", -1.0)  # every checkout is "idle"
        await _backend_pid(engine)
        assert pings == [1]
    finally:
        await engine.dispose()


async def test_a_connection_that_died_while_idle_is_replaced(database_url, monkeypatch):
    engine = make_engine(database_url, 1)
    admin = make_engine(database_url, 1)
    try:
        first = await _backend_pid(engine)
        await _terminate(admin, first)
        monkeypatch.setattr(engine_module, "PING_WHEN_IDLE_S", -1.0)
        second = await _backend_pid(engine)  # no error: the ping found it dead
        assert second != first
    finally:
        await engine.dispose()
        await admin.dispose()


async def test_without_the_idle_ping_the_dead_connection_fails_once(database_url):
    """What the ping saves a request from (and what a busy pool risks after a database
    restart): one failed statement, after which the pool reconnects."""
    engine = make_engine(database_url, 1)
    admin = make_engine(database_url, 1)
    try:
        first = await _backend_pid(engine)
        await _terminate(admin, first)
        with pytest.raises(Exception):  # noqa: B017 - the driver's "connection closed" error
            await _backend_pid(engine)
        assert await _backend_pid(engine) != first
    finally:
        await engine.dispose()
        await admin.dispose()


async def test_the_connection_returned_last_is_handed_out_next(database_url):
    engine = make_engine(database_url, 2)
    try:
        async with engine.connect() as a, engine.connect() as b:  # two open connections
            pids = {int(await c.scalar(text("SELECT pg_backend_pid()"))) for c in (a, b)}
        assert len(pids) == 2
        used = {await _backend_pid(engine) for _ in range(4)}
        assert len(used) == 1  # one warm connection serves a sequential load
    finally:
        await engine.dispose()
