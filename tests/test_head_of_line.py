"""One tenant's large write must not stall another's: a real `knowmind serve` process over
HTTP, with a small per-tenant embedding queue. Tenant A's large memory is being embedded; A's
next write is refused at once (429, Retry-After), B's one sentence is stored meanwhile."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.test_server_process import free_port, knowmind, run_cli, stop, wait_ready

pytestmark = pytest.mark.slow

PARAGRAPH = "Der Wartungsbericht beschreibt Lüfter, Netzteile und Kabelwege im Rechenzentrum. "


def _token(data_dir, name: str) -> dict[str, str]:
    tenant_id = run_cli(data_dir, "tenant", "create", name).split()[1]
    token = run_cli(data_dir, "token", "create", "--tenant", tenant_id, "--scopes", "read,write")
    return {"Authorization": f"Bearer {token.strip().splitlines()[-1]}"}


async def _race(base: str, a: dict[str, str], b: dict[str, str]) -> dict[str, object]:
    large = {"content": "\n\n".join(f"Abschnitt {i}. " + PARAGRAPH * 10 for i in range(120))}
    async with httpx.AsyncClient(base_url=base, timeout=120) as http:
        started = time.perf_counter()
        upload = asyncio.ensure_future(http.post("/v1/memories", json=large, headers=a))
        await asyncio.sleep(1.0)  # A's 120 chunks are being embedded
        refused = await http.post("/v1/memories", json={"content": "Noch ein Satz."}, headers=a)
        b_started = time.perf_counter()
        served = await http.post("/v1/memories", json={"content": "Ein Satz von B."}, headers=b)
        b_seconds = time.perf_counter() - b_started
        upload_pending = not upload.done()
        stored = await upload
        return {
            "refused": refused,
            "served": served,
            "b_seconds": b_seconds,
            "upload_pending": upload_pending,
            "stored": stored,
            "upload_seconds": time.perf_counter() - started,
        }


def test_a_tenant_over_its_queue_share_gets_429_while_others_write(tmp_path):
    data_dir = tmp_path / "km"
    run_cli(data_dir, "migrate")
    a, b = _token(data_dir, "tenant-a"), _token(data_dir, "tenant-b")
    port = free_port()
    server = knowmind(
        data_dir,
        "serve",
        port=port,
        env_extra={"KNOWMIND_EMBED_QUEUE_PER_TENANT": "20", "KNOWMIND_RERANKER": "none"},
    )
    try:
        wait_ready(f"http://127.0.0.1:{port}", server)
        outcome = asyncio.run(_race(f"http://127.0.0.1:{port}", a, b))
    finally:
        stop(server)
    refused, served = outcome["refused"], outcome["served"]
    assert refused.status_code == 429, refused.text
    assert int(refused.headers["retry-after"]) >= 1
    assert served.status_code == 201, served.text
    assert outcome["upload_pending"], outcome  # B was not queued behind A's upload
    # B waits for the batch under way (32 passages), not for A's 120: on a quiet machine about
    # 1 s against 4 (the ratio holds on a loaded one too)
    assert outcome["b_seconds"] < 0.5 * outcome["upload_seconds"], outcome
    assert outcome["stored"].status_code == 201


def test_after_the_server_is_killed_its_database_stops_and_the_next_one_starts(tmp_path):
    """kill -9 of `knowmind serve` takes its PostgreSQL along (its watchdog stops it, see
    tests/test_orphan_database.py); the next server starts cleanly on the data, keeps it, and
    stops it on shutdown."""
    data_dir = tmp_path / "km"
    run_cli(data_dir, "migrate")
    auth = _token(data_dir, "tenant-a")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    first = knowmind(data_dir, "serve", port=port, env_extra={"KNOWMIND_RERANKER": "none"})
    try:
        wait_ready(base, first)
        stored = httpx.post(f"{base}/v1/memories", json={"content": "Bleibt."}, headers=auth)
        assert stored.status_code == 201
    finally:
        first.kill()
        first.communicate(timeout=30)
    deadline = time.monotonic() + 10
    while (data_dir / "pgdata" / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()  # stopped, not orphaned
    second = knowmind(data_dir, "serve", port=port, env_extra={"KNOWMIND_RERANKER": "none"})
    try:
        wait_ready(base, second)
        again = httpx.get(f"{base}/v1/memories/{stored.json()['id']}", headers=auth)
        assert again.status_code == 200
    finally:
        out, err = stop(second)
    assert second.returncode == 0, err
    assert "embedded_postgres.stale_server" not in out + err  # nothing was left running
    assert not (data_dir / "pgdata" / "postmaster.pid").exists()
