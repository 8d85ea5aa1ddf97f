"""The real thing: `knowmind serve` as a process on the embedded PostgreSQL, over real HTTP,
the start banner's lines, a restart that keeps the data, and logs free of secrets and content.
(The README's walkthrough runs in tests/test_newcomer.py.)"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

SECRET_CONTENT = "Das Passwort für den Tresor im Keller ist Kolibri-Sieben."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def knowmind(
    data_dir: Path,
    *args: str,
    port: int | None = None,
    env_extra: dict[str, str] | None = None,
    log_to: Path | None = None,
) -> subprocess.Popen:
    """``log_to``: stdout and stderr go to files there (a busy server would fill a pipe nobody
    reads and stall), else to pipes for ``communicate``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMIND_")}
    env |= {
        "KNOWMIND_DATA_DIR": str(data_dir),
        "KNOWMIND_LOG_FORMAT": "json",
        "PYTHONUNBUFFERED": "1",
        **(env_extra or {}),
    }
    if port is not None:
        env["KNOWMIND_PORT"] = str(port)
    command = [sys.executable, "-m", "knowmind", *args]
    if log_to is not None:
        log_to.mkdir(parents=True, exist_ok=True)
        with open(log_to / "stdout", "w") as out, open(log_to / "stderr", "w") as err:
            return subprocess.Popen(command, env=env, stdout=out, stderr=err, text=True)
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def run_cli(data_dir: Path, *args: str) -> str:
    process = knowmind(data_dir, *args)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return out


def wait_ready(base: str, process: subprocess.Popen, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            said = process.stderr.read() if process.stderr else "(see its log file)"
            raise AssertionError(f"server exited: {said}")
        try:
            if httpx.get(f"{base}/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("server did not become ready")


def stop(process: subprocess.Popen) -> tuple[str, str]:
    process.send_signal(signal.SIGTERM)
    return process.communicate(timeout=60)


def test_serve_walkthrough_restart_and_clean_logs(tmp_path):
    data_dir = tmp_path / "knowmind"
    port = free_port()
    base = f"http://127.0.0.1:{port}"

    # CLI before the server: tenant and token on the embedded database.
    run_cli(data_dir, "migrate")
    tenant_line = run_cli(data_dir, "tenant", "create", "acme", "--language", "german")
    tenant_id = tenant_line.split()[1]
    token = (
        run_cli(data_dir, "token", "create", "--tenant", tenant_id, "--scopes", "read,write")
        .strip()
        .splitlines()[-1]
    )
    auth = {"Authorization": f"Bearer {token}"}

    server = knowmind(data_dir, "serve", port=port)
    try:
        wait_ready(base, server)
        admin_token = (data_dir / "admin_token").read_text().strip()
        admin = {"Authorization": f"Bearer {admin_token}"}
        created = httpx.post(f"{base}/v1/admin/tenants", json={"name": "globex"}, headers=admin)
        assert created.status_code == 201
        stored = httpx.post(
            f"{base}/v1/memories",
            json={"title": "Tresor", "content": SECRET_CONTENT, "tags": ["geheim"]},
            headers=auth,
        )
        assert stored.status_code == 201, stored.text
        memory_id = stored.json()["id"]
        httpx.post(
            f"{base}/v1/memories",
            headers=auth,
            json={"content": "Die Kantine bietet dienstags vegetarische Lasagne an."},
        )
        found = httpx.post(
            f"{base}/v1/recall",
            headers=auth,
            json={"query": "What is the password for the safe?", "k": 2},
        )
        assert found.json()["results"][0]["memory_id"] == memory_id
    finally:
        out, err = stop(server)
    assert server.returncode == 0, err
    assert "admin token (shown once" in out
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()  # embedded server stopped
    assert out.count(admin_token) == 1  # the banner shows a generated admin token once
    assert "Kolibri" not in out + err and token not in out + err and admin_token not in err
    assert '"route": "/v1/recall"' in err and f'"tenant_id": "{tenant_id}"' in err

    # Restart: same data, the admin token is not printed again.
    server = knowmind(data_dir, "serve", port=port)
    try:
        wait_ready(base, server)
        again = httpx.get(f"{base}/v1/memories/{memory_id}", headers=auth)
        assert again.status_code == 200
        assert again.json()["content"] == SECRET_CONTENT
    finally:
        out, _ = stop(server)
    assert admin_token not in out


def test_unknown_embedder_is_refused_with_a_message(tmp_path):
    process = knowmind(tmp_path / "km", "serve", env_extra={"KNOWMIND_EMBEDDER": "bogus"})
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2
    assert "KNOWMIND_EMBEDDER='bogus'" in err


def test_jobs_left_by_a_server_are_done_by_knowmind_worker(tmp_path):
    """A server without workers accepts memories; `knowmind worker` (after a restart, or as a
    separate process) finds the committed extraction jobs and runs them."""
    data_dir = tmp_path / "km"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    run_cli(data_dir, "migrate")
    tenant_id = run_cli(data_dir, "tenant", "create", "acme").split()[1]
    token = run_cli(data_dir, "token", "create", "--tenant", tenant_id).strip().splitlines()[-1]
    auth = {"Authorization": f"Bearer {token}"}
    quiet = {"KNOWMIND_RUN_WORKERS": "off", "KNOWMIND_RERANKER": "none"}
    server = knowmind(data_dir, "serve", port=port, env_extra=quiet)
    try:
        wait_ready(base, server)
        stored = httpx.post(
            f"{base}/v1/memories",
            headers=auth,
            json={"content": "Herr Otto Kranz leitet die Beispiel AG."},
        )
        job_id = stored.json()["job_id"]
        assert httpx.get(f"{base}/v1/jobs/{job_id}", headers=auth).json()["status"] == "pending"
    finally:
        stop(server)
    worker = knowmind(data_dir, "worker", env_extra={"KNOWMIND_RERANKER": "none"})
    try:
        deadline = time.monotonic() + 60
        while "knowmind worker running" not in (worker.stdout.readline() or "x"):
            assert time.monotonic() < deadline and worker.poll() is None
        time.sleep(2.0)  # the worker polls every second
    finally:
        _, err = stop(worker)
    assert worker.returncode == 0, err
    assert '"event": "jobs.done"' in err
    server = knowmind(data_dir, "serve", port=port, env_extra=quiet)
    try:
        wait_ready(base, server)
        job = httpx.get(f"{base}/v1/jobs/{job_id}", headers=auth).json()
        assert job["status"] == "done" and job["result"]["ner"] >= 2
    finally:
        stop(server)


def _bash(text: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``text`` run as a pasted block: bash, stop at the first failing command."""
    return subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", text],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("data_dir_set", [True, False])
def test_banner_lines_work_as_written(tmp_path, data_dir_set):
    """The start banner's lines, run by bash as a newcomer would paste them, with and without
    KNOWMIND_DATA_DIR (then the default data dir, here under a HOME of the test's own)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    home = tmp_path / "home"
    home.mkdir()
    data_dir = tmp_path / "knowmind"
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMIND_")}
    env |= {"HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share")}
    if data_dir_set:
        env["KNOWMIND_DATA_DIR"] = str(data_dir)
    default_dir = Path("/var/lib/knowmind") if os.geteuid() == 0 else None  # root's default
    made_default = default_dir is not None and not data_dir_set and not default_dir.exists()
    env |= {"KNOWMIND_PORT": str(port), "KNOWMIND_RERANKER": "none", "PYTHONUNBUFFERED": "1"}
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "knowmind", "serve"], env=env, stdout=out, stderr=err
        )
    try:
        wait_ready(base, server)
        banner = (tmp_path / "out").read_text()
        pasted = banner.split("get a tenant token (paste into a shell):\n", 1)[1]
        if not data_dir_set and not made_default:  # this machine's default dir holds tenants
            suffix = uuid.uuid4().hex[:8]
            pasted = pasted.replace('"name": "demo"', f'"name": "demo-{suffix}"')
        made = re.compile(r"tenant ([0-9a-f-]{36}) token kmt_\S+")
        tenants = []
        for name in ("banner", "banner again"):
            ran = _bash(pasted, env)
            assert ran.returncode == 0, f"{name}: {ran.stdout}\n{ran.stderr}"
            found = made.search(ran.stdout)
            assert found, ran.stdout
            tenants.append(found.group(1))
        assert tenants[0] == tenants[1]  # pasted twice: the tenant of the first, a new token
        named = f"{data_dir} (KNOWMIND_DATA_DIR)" if data_dir_set else "KNOWMIND_DATA_DIR is unset"
        assert "data dir " in banner and named in banner  # where `admin-token` must look
    finally:
        stop(server)
        if made_default and default_dir is not None:
            shutil.rmtree(default_dir, ignore_errors=True)  # leave the machine as it was


@contextmanager
def served(root: Path, admin_token: str, **settings: str) -> Iterator[str]:
    """A `knowmind serve` on an embedded PostgreSQL of its own under ``root``, logging to
    ``root/log``; yields its base URL and stops it afterwards. ``settings``: more
    ``KNOWMIND_*`` variables by their lower-case suffix (``rate_limit_burst="5"``)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {"KNOWMIND_ADMIN_TOKEN": admin_token, "KNOWMIND_RERANKER": "none"}
    env |= {f"KNOWMIND_{name.upper()}": value for name, value in settings.items()}
    process = knowmind(root / "knowmind", "serve", port=port, env_extra=env, log_to=root / "log")
    try:
        wait_ready(base, process)
        yield base
    finally:
        stop(process)


def tenant_token(base: str, admin_token: str, name: str, scopes: list[str]) -> str:
    """A new tenant's token, made through the admin API."""
    admin = {"Authorization": f"Bearer {admin_token}"}
    tenant = httpx.post(f"{base}/v1/admin/tenants", json={"name": name}, headers=admin)
    assert tenant.status_code == 201, tenant.text
    token = httpx.post(
        f"{base}/v1/admin/tenants/{tenant.json()['id']}/tokens",
        json={"scopes": scopes},
        headers=admin,
    )
    assert token.status_code == 201, token.text
    return str(token.json()["token"])


def test_models_pull_names_what_it_could_not_fetch(tmp_path):
    """Without a network (HF_HUB_OFFLINE here) `knowmind models pull` says which model it could
    not fetch and why, and exits 1; with one it fills the cache the server reads offline."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWMIND_")}
    env |= {"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    pulled = subprocess.run(
        [sys.executable, "-m", "knowmind", "models", "pull"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert pulled.returncode == 1
    for model in ("intfloat/multilingual-e5-large", "BAAI/bge-reranker-v2-m3"):
        assert f"{model}: not downloaded" in pulled.stderr
