"""The server's PostgreSQL backends yield the cores to it when they run on this host
(``db.backend_priority``): checked on the real embedded server's processes, in ``/proc``."""

from __future__ import annotations

import os
from pathlib import Path
from uuid import UUID

import pytest
from sqlalchemy import text

from knowmind.db.backend_priority import lower_backend_priority
from knowmind.db.embedded import process_stat
from knowmind.db.engine import Database
from knowmind.settings import SettingsError
from tests.conftest import make_tenant

NICE_FIELD = 16  # proc(5) field 19, in process_stat's numbering


def _nice_of(pid: int) -> int:
    stat_of = process_stat(pid)
    assert stat_of is not None, f"backend {pid} is gone"
    return int(stat_of[1][NICE_FIELD])


def _autogroup_nice(pid: int) -> int | None:
    """The nice value of the process's autogroup ("/autogroup-12 nice 7"), or None where the
    kernel has no autogroups."""
    path = Path(f"/proc/{pid}/autogroup")
    return int(path.read_text().split()[-1]) if path.exists() else None


async def _backends(db: Database, tenant: UUID) -> dict[str, int]:
    """One backend pid of each of the three pools: the read sessions, the app role's, the
    owner's."""
    async with db.read(tenant) as conn:
        reader = conn.get_server_pid()
    async with db.app.connect() as conn:
        app = int(await conn.scalar(text("SELECT pg_backend_pid()")))
    async with db.owner.connect() as conn:
        owner = int(await conn.scalar(text("SELECT pg_backend_pid()")))
    return {"reader": reader, "app": app, "owner": owner}


async def test_every_pools_backends_get_the_nice_value(settings, client):
    tenant = UUID((await make_tenant(client)).id)
    db = Database.connect(settings.database.database_url, None, 1, backend_nice=7)
    try:
        backends = await _backends(db, tenant)
        assert {pool: _nice_of(pid) for pool, pid in backends.items()} == {
            "reader": 7,
            "app": 7,
            "owner": 7,
        }
        for pid in backends.values():
            assert _autogroup_nice(pid) in (None, 7)
    finally:
        await db.dispose()


async def test_without_a_nice_value_the_backends_are_left_alone(settings, client):
    tenant = UUID((await make_tenant(client)).id)
    db = Database.connect(settings.database.database_url, None, 1, backend_nice=0)
    try:
        backends = await _backends(db, tenant)
        assert {_nice_of(pid) for pid in backends.values()} == {0}
        for pid in backends.values():
            assert _autogroup_nice(pid) in (None, 0)
    finally:
        await db.dispose()


class _RemoteConnectionDouble:
    """Unit-test double: a connection whose backend's pid names a process of this host, but
    that is not reached over a local socket (as a server on another host or in another pid
    namespace could report)."""

    _transport = None

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def get_server_pid(self) -> int:
        return self.pid


def test_a_pid_alone_never_renices_a_process_of_this_host():
    before = _nice_of(os.getpid())
    reason = lower_backend_priority(_RemoteConnectionDouble(os.getpid()), before + 5)
    assert reason is not None and "does not run on this host" in reason
    assert _nice_of(os.getpid()) == before


@pytest.mark.parametrize("nice", [-1, 20])
def test_the_nice_value_is_checked(nice, settings):
    with pytest.raises(SettingsError, match="KNOWMIND_DB_BACKEND_NICE"):
        settings.with_overrides(db_backend_nice=nice).validate()
