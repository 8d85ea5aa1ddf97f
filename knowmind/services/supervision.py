"""Watching the database: notice when it is gone, restart the embedded server this process
owns, drop connections that died with it, and say when the process cannot recover (``/health``
turns 503 so an orchestrator restarts it)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import structlog
from sqlalchemy import text

from knowmind.db.embedded import EmbeddedPostgres
from knowmind.db.engine import Database

__all__ = ["DatabaseSupervisor", "SupervisionReport"]

log = structlog.get_logger(__name__)

PING_TIMEOUT_S = 2.0


@dataclass(slots=True)
class SupervisionReport:
    up: bool = True
    down_since: float | None = None
    restarts: int = 0
    last_problem: str | None = None


class DatabaseSupervisor:
    def __init__(
        self,
        db: Database,
        embedded: EmbeddedPostgres | None,
        interval_s: float = 2.0,
        unhealthy_after_s: float = 60.0,
    ) -> None:
        self.db, self.embedded = db, embedded
        self.interval_s, self.unhealthy_after_s = interval_s, unhealthy_after_s
        self.report = SupervisionReport()

    @property
    def healthy(self) -> bool:
        """False once the database has been unreachable for ``unhealthy_after_s``."""
        since = self.report.down_since
        return since is None or time.monotonic() - since < self.unhealthy_after_s

    async def run_forever(self) -> None:
        while True:
            await self.check_once()
            await asyncio.sleep(self.interval_s)

    async def check_once(self) -> None:
        if await self._ping():
            if not self.report.up:
                log.warning("database.recovered", restarts=self.report.restarts)
                await self.db.reset_connections()
            self.report.up, self.report.down_since = True, None
            return
        if self.report.up:
            log.error("database.unreachable", problem=self.report.last_problem)
        self.report.up = False
        self.report.down_since = self.report.down_since or time.monotonic()
        await self._restart_embedded()

    async def _ping(self) -> bool:
        try:
            async with asyncio.timeout(PING_TIMEOUT_S):
                async with self.db.owner.connect() as conn:
                    await conn.execute(text("SELECT 1"))
            return True
        except Exception as exc:  # anything: the point is to notice, not to explain
            self.report.last_problem = type(exc).__name__
            return False

    async def _restart_embedded(self) -> None:
        server = self.embedded
        if server is None or not server.owned:
            return  # an external database: wait for it (and report unhealthy meanwhile)
        if await asyncio.to_thread(server.accepts_connections):
            return  # it is up again; the next ping will say so
        try:
            await asyncio.to_thread(server.restart)
            self.report.restarts += 1
            log.warning("database.embedded_restarted", restarts=self.report.restarts)
            await self.db.reset_connections()
        except Exception as exc:
            self.report.last_problem = f"restart failed: {type(exc).__name__}"
            log.error("database.embedded_restart_failed", error=type(exc).__name__)
