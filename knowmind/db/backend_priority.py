"""Lower the CPU priority of this server's PostgreSQL backends when the database runs on this
host (the embedded server, or any reached over a Unix socket), so that they yield the cores to
the server process that feeds them.

Why: every PostgreSQL backend starts a session of its own (``setsid``). On a kernel with
autogroup scheduling (``/proc/sys/kernel/sched_autogroup_enabled``, on by default on many
distributions; it applies to processes outside any CPU cgroup) each session is a scheduling
group of its own, so the server process — the event loop that drives every recall's stages —
weighs as much as a single backend. With a few backends running it then waits in the run queue
while the backends it should feed run out of work: on 2 cores at 8 concurrent recalls the loop
waited 42 % of the time and the cores stood 13 % idle. Raising the backends' nice (their
autogroup's, and their own for kernels without autogroups) let the loop wait 13-16 % and kept
the cores 92-94 % busy. The nice value of the server process itself cannot help: it counts only
within its own group.

The backend is identified by the kernel, not by its pid alone: the Unix socket's peer
(``SO_PEERCRED``, the postmaster as this host sees it) must be the parent of the process with
the backend's pid. A server in another pid namespace or on another host is left alone.
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path
from typing import Any

import structlog

from knowmind.db.embedded import process_stat

__all__ = ["MAX_NICE", "lower_backend_priority", "yield_to_server"]

log = structlog.get_logger(__name__)
_told: set[str] = set()  # the reasons already logged: said once per process, not per connection

MAX_NICE = 19
_PEERCRED = struct.Struct("3i")  # pid, uid, gid


def _postmaster_of(sock: socket.socket | None) -> int | None:
    """The pid of the process listening on the other end of a local socket, or None."""
    if sock is None or sock.family != socket.AF_UNIX or not hasattr(socket, "SO_PEERCRED"):
        return None
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    pid = _PEERCRED.unpack(raw)[0]
    return pid or None  # 0: the peer is outside this pid namespace


def _local_backend(connection: Any) -> int | None:
    """The pid of ``connection``'s backend (an asyncpg connection) when it runs on this host."""
    transport = getattr(connection, "_transport", None)  # asyncpg keeps its socket there
    postmaster = _postmaster_of(transport.get_extra_info("socket") if transport else None)
    backend = connection.get_server_pid()
    if postmaster is None or not backend:
        return None
    stat_of = process_stat(backend)
    if stat_of is None or int(stat_of[1][1]) != postmaster:
        return None
    return int(backend)


def lower_backend_priority(connection: Any, nice: int) -> str | None:
    """Give ``connection``'s backend the nice value ``nice`` (its scheduling group's and its
    own) when it runs on this host; why not, or None when done (or when ``nice`` is 0)."""
    if nice <= 0:
        return None
    backend = _local_backend(connection)
    if backend is None:
        return "the database does not run on this host (or is not reached over a Unix socket)"
    try:
        autogroup = Path(f"/proc/{backend}/autogroup")
        if autogroup.exists():
            autogroup.write_text(str(min(nice, MAX_NICE)))
        os.setpriority(os.PRIO_PROCESS, backend, min(nice, MAX_NICE))
    except OSError as exc:
        return f"cannot renice backend: {exc.strerror or exc}"
    return None


def yield_to_server(connection: Any, nice: int) -> None:
    """``lower_backend_priority``, logging (once) why it could not be done."""
    reason = lower_backend_priority(connection, nice)
    if reason is not None and reason not in _told:
        _told.add(reason)
        log.info("db.backend_priority_unchanged", reason=reason, nice=nice)
