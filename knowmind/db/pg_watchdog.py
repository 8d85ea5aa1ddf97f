"""The embedded PostgreSQL's watchdog: a small process between the knowmind process that starts
the database and the postmaster, so that the database never outlives its server.

``EmbeddedPostgres`` runs it as a script (standard library only, never imported from the
package): ``python -I pg_watchdog.py FD USER POSTGRES ARGS...``. It starts the postmaster as its
own child (as ``USER`` when given: the OS user PostgreSQL runs as under root), then waits on FD,
the read end of a pipe whose only write end the server holds. When that end closes — the
server stopped the database, exited, or was killed with SIGKILL, which nothing inside the server
can react to — the kernel closes it, and the watchdog stops the postmaster with a fast shutdown
(SIGINT: sessions rolled back, a checkpoint written), then an immediate one (SIGQUIT) and
SIGKILL if it hangs. When the postmaster ends by itself, so does the watchdog, and the server's
supervisor starts a new pair. SIGTERM asks for the same stop as a closed pipe; a terminal's
Ctrl-C does not reach it (its own session): stopping is the server's call.

Why a pipe and not a parent-death signal (``prctl(PR_SET_PDEATHSIG)``) on the postmaster: that
signal fires when the *thread* that started the child ends, not the process (the server
restarts its database from a worker thread), and the kernel clears it when the child changes
its user (PostgreSQL refuses root and runs as another user). A pipe's end belongs to the process.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from typing import Any

__all__ = ["main"]

#: (signal, seconds to wait for the postmaster after sending it)
STOP_STEPS = ((signal.SIGINT, 60.0), (signal.SIGQUIT, 10.0), (signal.SIGKILL, 10.0))


class _StopRequested(Exception):
    pass


def _on_sigterm(_signum: int, _frame: object) -> None:
    raise _StopRequested


def _say(message: str) -> None:
    print(f"knowmind pg_watchdog {os.getpid()}: {message}", file=sys.stderr, flush=True)


def _as_user(user: str) -> dict[str, Any]:
    if not user:
        return {}
    import pwd

    entry = pwd.getpwnam(user)
    # no supplementary groups of the server's user (root's group 0 among them)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def _stop(postmaster: subprocess.Popen[bytes]) -> int:
    for signum, grace_s in STOP_STEPS:
        with contextlib.suppress(ProcessLookupError):
            postmaster.send_signal(signum)
        try:
            return postmaster.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            _say(f"postmaster {postmaster.pid} still running after {signum.name}")
    return postmaster.wait()


def _wait(control: int, postmaster: subprocess.Popen[bytes]) -> int | None:
    """The postmaster's exit status when it ends by itself, None when the server is gone."""
    try:
        pidfd: int | None = os.pidfd_open(postmaster.pid)
    except (AttributeError, OSError):  # before Linux 5.3: look every second
        pidfd = None
    watched = [control] if pidfd is None else [control, pidfd]
    while True:
        ready, _, _ = select.select(watched, [], [], None if pidfd is not None else 1.0)
        if postmaster.poll() is not None:
            return postmaster.returncode
        if control in ready and not os.read(control, 512):
            return None


def main(argv: list[str]) -> int:
    control, user, command = int(argv[0]), argv[1], argv[2:]
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    postmaster = subprocess.Popen(command, stdin=subprocess.DEVNULL, cwd="/", **_as_user(user))
    try:
        ended = _wait(control, postmaster)
    except _StopRequested:
        ended = None
        _say(f"SIGTERM: stopping postmaster {postmaster.pid}")
    if ended is not None:
        _say(f"postmaster {postmaster.pid} exited with status {ended}")
        return ended
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopping already
    _say(f"server gone or done: fast shutdown of postmaster {postmaster.pid}")
    return _stop(postmaster)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
