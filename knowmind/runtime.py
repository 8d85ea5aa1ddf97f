"""Everything a running server holds: pools, the embedder and the services built on them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from sqlalchemy import text

from knowmind.db.engine import Database
from knowmind.db.migrate import check_embedding_model, current_revision, head_revision
from knowmind.models.base import Embedder
from knowmind.models.executor import EmbeddingExecutor
from knowmind.models.factory import build_embedder
from knowmind.recall.bm25 import FullTextStage
from knowmind.recall.pipeline import RecallPipeline
from knowmind.recall.vector import VectorStage
from knowmind.services.admin import AdminService
from knowmind.services.memories import MemoryService
from knowmind.services.recall import RecallService
from knowmind.settings import Settings

__all__ = ["Runtime"]


@dataclass(slots=True)
class Runtime:
    settings: Settings
    db: Database
    embedder: EmbeddingExecutor
    admin: AdminService
    memories: MemoryService
    recall: RecallService

    @classmethod
    async def start(cls, settings: Settings, embedder: Embedder | None = None) -> Runtime:
        """``settings.database_url`` must point at a migrated database."""
        if not settings.database_url:
            raise ValueError("Runtime.start needs settings.database_url")
        if embedder is None:
            embedder = await asyncio.to_thread(
                build_embedder, settings.embedder, settings.embed_threads
            )
        await check_embedding_model(settings.database_url, embedder.model_id, embedder.dim)
        db = Database.connect(
            settings.database_url, settings.app_database_url, settings.db_pool_size
        )
        executor = EmbeddingExecutor(embedder)
        pipeline = RecallPipeline(
            db, executor, [FullTextStage(), VectorStage()], rrf_k=settings.rrf_k
        )
        return cls(
            settings=settings,
            db=db,
            embedder=executor,
            admin=AdminService(db, embedder.model_id, embedder.dim),
            memories=MemoryService(db, executor, settings),
            recall=RecallService(pipeline, settings),
        )

    async def close(self) -> None:
        await self.embedder.close()
        await self.db.dispose()

    async def readiness(self) -> dict[str, str]:
        """Per component: "ok" or what is wrong."""
        checks: dict[str, str] = {}
        try:
            async with self.db.app.connect() as conn:
                await conn.execute(text("SELECT 1"))
            checks["database"] = "ok"
        except Exception as exc:
            checks["database"] = f"unreachable: {type(exc).__name__}"
        try:
            revision = await current_revision(self.settings.database_url or "")
            head = head_revision()
            checks["schema"] = "ok" if revision == head else f"at {revision}, head is {head}"
        except Exception as exc:
            checks["schema"] = f"unknown: {type(exc).__name__}"
        checks["embedder"] = "ok" if self.embedder.dim > 0 else "not loaded"
        return checks
