"""CPU time of the benchmark's server: this process (every thread: the event loop, the
embedder's pool, the benchmark's own clients, which cost little) and the processes of the
PostgreSQL server it talks to (postmaster, backends, background workers), when that server runs
on this host. Per request, it is the work that bounds what concurrent clients can get out of the
cores: with ``cores`` cores and ``c`` seconds of CPU per request, no number of clients gets more
than ``cores / c`` requests per second.

PostgreSQL's processes are read from ``/proc`` (Linux): each one's run time in nanoseconds
(``/proc/PID/schedstat``; clock ticks of ``/proc/PID/stat`` where the kernel lacks it). A backend
that exits between two readings takes its time with it; the server's pools keep theirs open.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from knowmind.db.embedded import process_stat
from knowmind.runtime import Runtime

__all__ = ["CpuClock"]

_PROC = Path("/proc")
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")  # Linux, as /proc is


def _run_time_s(pid: int | str, fields: list[str]) -> float:
    """A process's run time: ``schedstat``'s, else its user and system clock ticks."""
    try:
        return int((_PROC / str(pid) / "schedstat").read_text().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return (int(fields[11]) + int(fields[12])) * _TICK_S  # utime + stime


@dataclass(frozen=True, slots=True)
class CpuClock:
    """CPU seconds so far of this process and of the PostgreSQL server whose postmaster is
    ``postmaster`` (None: the server is not on this host, and ``seconds`` is None too)."""

    postmaster: int | None

    @classmethod
    async def of_database(cls, runtime: Runtime) -> CpuClock:
        """The clock of ``runtime``'s database: the parent of one of its backends."""
        async with runtime.database.db.owner_tx() as conn:
            backend = int(await conn.scalar(text("SELECT pg_backend_pid()")))
        stat_of = process_stat(backend)
        if stat_of is None or not stat_of[0].startswith("postgres"):
            return cls(None)  # another host's (or container's) server
        return cls(int(stat_of[1][1]))

    def seconds(self) -> float | None:
        if self.postmaster is None:
            return None
        return time.process_time() + self.database_seconds()

    def database_seconds(self) -> float:
        """The postmaster's run time and that of each of its live children."""
        total = 0.0
        for entry in _PROC.iterdir():
            if not entry.name.isdigit():
                continue
            stat_of = process_stat(entry.name)
            if stat_of is not None and self.postmaster in (int(entry.name), int(stat_of[1][1])):
                total += _run_time_s(entry.name, stat_of[1])
        return total
