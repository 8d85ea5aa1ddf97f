"""Remember many memories at once: per-item results, batched embedding overlapped with the
writes. A bad item does not fail the others: each embedding group is written in one transaction
and one statement, and when that fails, each of its items is written again in a transaction of
its own, so the statuses are those of one transaction per item. A group's items become visible
together, and list in item order; items written on their own list after their group's."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from uuid import UUID

import numpy as np
import structlog
from sqlalchemy.ext.asyncio import AsyncConnection

from knowmind.errors import InvalidInputError, KnowmindError
from knowmind.ingest.chunker import chunk_text, pack_in_groups
from knowmind.ingest.pipeline import content_language, embed_each, passage_text
from knowmind.models.executor import MAX_BATCH, MAX_BATCH_CHARS
from knowmind.services.auth import Principal, tenant_of
from knowmind.services.memories import MemoryDraft, MemoryService, memory_key, scoped_draft
from knowmind.services.recipe import insert_memories
from knowmind.store import memories as memory_store

__all__ = [
    "EMBED_GROUP_CHARS",
    "EMBED_GROUP_CHUNKS",
    "MAX_BATCH_ITEMS",
    "BatchItemResult",
    "ItemError",
    "remember_batch",
]

log = structlog.get_logger(__name__)

MAX_BATCH_ITEMS = 100
# Chunks (and their characters) embedded per call while the previous group is written: one
# batch of the model thread, so the writes follow the model batch by batch and only the last
# batch's writes are left when the model is done.
EMBED_GROUP_CHUNKS = MAX_BATCH
EMBED_GROUP_CHARS = MAX_BATCH_CHARS


@dataclass(frozen=True, slots=True)
class ItemError:
    """Why one item was not stored; ``field`` names the offending field ("" = the item)."""

    field: str
    message: str


@dataclass(frozen=True, slots=True)
class BatchItemResult:
    index: int
    status: str  # "created" | "unchanged" | "error"
    id: UUID | None = None
    chunks: int = 0
    job_id: UUID | None = None
    error: ItemError | None = None


@dataclass(slots=True)
class _Pending:
    index: int
    draft: MemoryDraft
    sha: bytes
    contents: list[str] = field(default_factory=list)
    embeddings: np.ndarray | None = None


async def remember_batch(
    service: MemoryService, who: Principal, items: Sequence[MemoryDraft | ItemError]
) -> list[BatchItemResult]:
    """Results in item order. Items already rejected at the edge come in as ``ItemError``."""
    tenant = tenant_of(who)
    if len(items) > MAX_BATCH_ITEMS:
        raise InvalidInputError("items", f"at most {MAX_BATCH_ITEMS} per batch")
    results: dict[int, BatchItemResult] = {}
    pending: list[_Pending] = []
    for index, item in enumerate(items):
        if isinstance(item, ItemError):
            results[index] = BatchItemResult(index, "error", error=item)
            continue
        try:
            item = scoped_draft(who, item)
        except InvalidInputError as exc:
            results[index] = BatchItemResult(
                index, "error", error=ItemError(exc.field, exc.message)
            )
            continue
        pending.append(_Pending(index, item, memory_key(item)))
    async with service.db.tenant_tx(tenant) as conn:
        pending = await _relations_checked(service, conn, tenant, pending, results)
        existing = await memory_store.find_by_shas(conn, tenant, [p.sha for p in pending])
        counts = await memory_store.chunk_counts(conn, tenant, list(existing.values()))
        # the batch as a whole, before anything is embedded: its groups are written in
        # transactions of their own, and none of them is refused half-way
        new_jobs = len({p.sha for p in pending if p.sha not in existing})
        if new_jobs:
            await service.quota.check(conn, tenant, jobs=new_jobs)
    new = [p for p in pending if p.sha not in existing]
    for p in pending:
        if p.sha in existing:
            memory_id = existing[p.sha]
            results[p.index] = BatchItemResult(
                p.index, "unchanged", id=memory_id, chunks=counts.get(memory_id, 0)
            )
    stored = [r async for r in _embed_and_store(service, who, new)]
    results |= {r.index: r for r in stored}
    if any(r.status == "created" for r in stored):
        service.on_job_enqueued()
    return [results[i] for i in range(len(items))]


async def _relations_checked(
    service: MemoryService,
    conn: AsyncConnection,
    tenant: UUID,
    pending: list[_Pending],
    results: dict[int, BatchItemResult],
) -> list[_Pending]:
    """The items whose relations can be written (unchanged content included); the others
    fail with the field to blame, before anything is embedded."""
    checked = []
    for p in pending:
        try:
            await service.graph.check_inline_relations(conn, tenant, p.draft.relations)
        except InvalidInputError as exc:
            error = ItemError(exc.field, exc.message)
            results[p.index] = BatchItemResult(p.index, "error", error=error)
            continue
        checked.append(p)
    return checked


async def _embed_and_store(
    service: MemoryService, who: Principal, items: list[_Pending]
) -> AsyncIterator[BatchItemResult]:
    """Embed the items group by group (``EMBED_GROUP_CHUNKS`` chunks each) and store each group
    while the next one is being embedded: the database writes overlap the model's work.

    An embedding failure before anything is stored fails the request as a whole (as a single
    write would); once some items are stored, the items that could not be embedded get
    per-item errors, so the answer says exactly what was stored."""
    groups = _groups(service, items)
    if not groups:
        return
    owner = str(tenant_of(who))
    embedding = asyncio.ensure_future(_embed(service, owner, groups[0]))
    try:
        for number, group in enumerate(groups):
            try:
                await embedding
            except Exception as exc:
                if number == 0:
                    raise
                log.warning("batch.embedding_failed", error=type(exc).__name__)
                reason = str(exc) if isinstance(exc, KnowmindError) else type(exc).__name__
                for p in (p for rest in groups[number:] for p in rest):
                    yield BatchItemResult(
                        p.index, "error", error=ItemError("", f"not embedded: {reason}")
                    )
                return
            if number + 1 < len(groups):
                embedding = asyncio.ensure_future(_embed(service, owner, groups[number + 1]))
            for result in await _store_group(service, who, group):
                yield result
    finally:
        embedding.cancel()


def _groups(service: MemoryService, items: list[_Pending]) -> list[list[_Pending]]:
    """Chunk every item; group consecutive items of up to ``EMBED_GROUP_CHUNKS`` chunks and
    ``EMBED_GROUP_CHARS`` characters (an item larger than that is a group of its own)."""
    ingest = service.ingest
    for p in items:
        p.contents = chunk_text(
            p.draft.content, ingest.chunk_target_chars, ingest.chunk_overlap_chars
        ) or [p.draft.content.strip()]
    sizes = [(len(p.contents), sum(map(len, p.contents))) for p in items]
    return [
        [items[i] for i in r] for r in pack_in_groups(sizes, EMBED_GROUP_CHUNKS, EMBED_GROUP_CHARS)
    ]


async def _embed(service: MemoryService, owner: str, items: list[_Pending]) -> None:
    """Embed the items' chunks in one call (the executor batches them, taking turns with
    other tenants)."""
    passages = [[passage_text(p.draft.title, c) for c in p.contents] for p in items]
    for p, vectors in zip(items, await embed_each(service.embedder, passages, owner), strict=True):
        p.embeddings = vectors


async def _store_group(
    service: MemoryService, who: Principal, group: list[_Pending]
) -> list[BatchItemResult]:
    """The group's items in one transaction, those with relations (written by the graph
    service) or repeating an earlier item's content each in its own; and each in its own
    when the group's transaction fails, so that one bad item fails only itself."""
    together: list[_Pending] = []
    alone: list[_Pending] = []
    shas: set[bytes] = set()
    for p in group:
        (alone if p.draft.relations or p.sha in shas else together).append(p)
        shas.add(p.sha)
    results: list[BatchItemResult] = []
    if len(together) > 1:
        try:
            results = await _store_together(service, who, together)
        except Exception as exc:
            # (should the commit itself have gone through, the items now answer "unchanged")
            log.warning("batch.group_failed", items=len(together), error=type(exc).__name__)
            alone += together
    else:
        alone += together
    results += [await _store_one(service, who, p) for p in sorted(alone, key=lambda p: p.index)]
    return results


async def _store_together(
    service: MemoryService, who: Principal, items: list[_Pending]
) -> list[BatchItemResult]:
    """Items of distinct contents in one transaction and one statement."""
    tenant = tenant_of(who)
    rows = [_row(service, who, p) for p in items]
    async with service.db.tenant_tx(tenant, write=True) as conn:
        stored = await insert_memories(conn, tenant, rows)
        return await _outcomes(conn, tenant, items, stored)


async def _outcomes(
    conn: AsyncConnection,
    tenant: UUID,
    items: Sequence[_Pending],
    stored: Sequence[memory_store.InsertedMemory | None],
) -> list[BatchItemResult]:
    """Created, or unchanged where a current memory had the content already (an earlier item
    of this batch, or a concurrent write): then with that memory's id."""
    repeated = [p.sha for p, row in zip(items, stored, strict=True) if row is None]
    found = await memory_store.find_by_shas(conn, tenant, repeated)
    return [
        BatchItemResult(p.index, "created", id=row.id, chunks=row.chunks, job_id=row.job_id)
        if row is not None
        else BatchItemResult(p.index, "unchanged", id=found.get(p.sha))
        for p, row in zip(items, stored, strict=True)
    ]


def _row(service: MemoryService, who: Principal, p: _Pending) -> memory_store.MemoryToInsert:
    assert p.embeddings is not None
    language = service.language_of(who.language, p.draft.content)
    return memory_store.MemoryToInsert(
        p.draft,
        p.sha,
        language,
        p.contents,
        p.embeddings,
        content_language=content_language(p.draft.content),
    )


async def _store_one(service: MemoryService, who: Principal, p: _Pending) -> BatchItemResult:
    """One item in its own transaction; a failure rolls back this item only."""
    tenant = tenant_of(who)
    try:
        assert p.embeddings is not None
        async with service.db.tenant_tx(tenant, write=True) as conn:
            stored = await service.write(
                conn, who, p.draft, p.sha, p.contents, p.embeddings, relations=p.draft.relations
            )
            [result] = await _outcomes(conn, tenant, [p], [stored])
            return result
    except InvalidInputError as exc:
        return BatchItemResult(p.index, "error", error=ItemError(exc.field, exc.message))
    except KnowmindError as exc:
        return BatchItemResult(p.index, "error", error=ItemError("", str(exc)))
    except Exception as exc:
        log.exception("batch.item_failed", index=p.index)
        return BatchItemResult(
            p.index, "error", error=ItemError("", f"not stored: {type(exc).__name__}")
        )
