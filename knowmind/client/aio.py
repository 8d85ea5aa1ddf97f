"""``AsyncKnowmind``: the asyncio twin of :class:`~knowmind.client.sync.Knowmind`, the same
methods (``await client.recall("…")``; ``memories`` and ``answer_stream`` are async iterators).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any
from uuid import UUID

from knowmind.client import calls
from knowmind.client import types as records
from knowmind.client.http import AsyncTransport

__all__ = ["AsyncKnowmind"]

Id = UUID | str


class AsyncKnowmind(AsyncTransport):
    """``async with AsyncKnowmind("http://host:8080", "kmt_…") as km: await km.recall(…)``."""

    async def __aenter__(self) -> AsyncKnowmind:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    # -- memories -------------------------------------------------------------------------------

    async def remember(
        self, content: str, *, wait: bool = False, **fields: Any
    ) -> records.Remembered:
        """``fields``: title, memory_type, tags, source, domain, metadata, relations,
        occurred_at (a datetime or ISO 8601), speaker, role, user_id, agent_id, session_id;
        ``wait``: answer once the extraction job ran (``records.Remembered.job``)."""
        return await self._run(calls.remember(content, wait, fields))

    async def remember_many(self, items: list[dict[str, Any]]) -> records.BatchResult:
        """Up to 100 memories (each like ``remember``'s arguments), per-item results."""
        return await self._run(calls.remember_many(items))

    async def memory(self, memory_id: Id) -> records.Memory:
        return await self._run(calls.memory(memory_id))

    async def memories(self, page_size: int = 100, **filters: Any) -> AsyncIterator[records.Memory]:
        """Every memory, newest first, page by page (the cursor is followed for you);
        ``filters``: user_id, agent_id, session_id, occurred_after, occurred_before."""
        cursor: str | None = None
        while True:
            page = await self._run(calls.memory_page(page_size, cursor, filters))
            for memory in page.items:
                yield memory
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def history(self, memory_id: Id) -> records.History:
        """The memory's supersessions and automatic fact updates: who, what, when."""
        return await self._run(calls.history(memory_id))

    async def supersede(
        self,
        memory_id: Id,
        new_content: str,
        *,
        new_title: str | None = None,
        update_reason: str | None = None,
    ) -> records.Remembered:
        """``Knowmind.supersede``: the old memory holds until now, the returned one from now."""
        return await self._run(calls.supersede(memory_id, new_content, new_title, update_reason))

    update_fact = supersede  # MCP's name for it

    async def delete_memory(self, memory_id: Id) -> None:
        await self._run(calls.delete_memory(memory_id))

    async def erase_memory(self, memory_id: Id) -> records.Receipt:
        """Erase every trace of the memory; the receipt counts what went."""
        return await self._run(calls.erase_memory(memory_id))

    # -- recall and answers ---------------------------------------------------------------------

    async def recall(
        self, query: str, k: int = 5, min_score: float = 0.0, **options: Any
    ) -> records.Recall:
        """Each hit's ``score`` is the probability (0–1) that it answers the question;
        ``min_score`` leaves out the hits below it. ``options``: filters (e.g. ``{"user_id":
        "u1", "occurred_after": datetime(…)}``), hops, stages, rerank, weights, fusion,
        ranker, explain, as_of, known_at, reference_time."""
        return await self._run(calls.recall(query, k, min_score, options))

    async def recall_at_time(
        self, query: str, as_of: datetime | str, k: int = 5, **options: Any
    ) -> records.Recall:
        """What was valid at ``as_of`` (``known_at``: as the store knew it then)."""
        return await self._run(calls.recall_at_time(query, as_of, k, options))

    async def answer(self, question: str, **options: Any) -> records.Answer:
        """An answer citing its passages; ``options``: k, method, rerank, compress,
        parent_context, filters, llm_model, max_tokens, conversation_id, share_conversation."""
        return await self._run(calls.answer(question, False, options))

    def answer_stream(self, question: str, **options: Any) -> AsyncIterator[records.AnswerEvent]:
        """The answer as it is generated: ``token`` events, then ``done`` with the result."""
        return self._events(calls.answer(question, True, options))

    # -- documents and jobs ---------------------------------------------------------------------

    async def upload_document(
        self, content: str, title: str | None = None, *, wait: bool = False, **fields: Any
    ) -> records.Document:
        """A large document is ``accepted`` and stored by a job unless ``wait``; ``fields``:
        source, relations, replace_document_id, build_tree."""
        return await self._run(calls.upload_document(content, title, wait, fields))

    async def delete_document(self, document_id: Id) -> None:
        await self._run(calls.delete_document(document_id))

    async def erase_document(self, document_id: Id) -> records.Receipt:
        return await self._run(calls.erase_document(document_id))

    async def job(self, job_id: Id) -> records.Job:
        return await self._run(calls.job(job_id))

    async def wait_for_job(self, job_id: Id, timeout_s: float = 300.0) -> records.Job:
        deadline = time.monotonic() + timeout_s
        while True:
            job = await self.job(job_id)
            if job.status in ("done", "failed") or time.monotonic() > deadline:
                return job
            await asyncio.sleep(0.25)

    # -- the graph ------------------------------------------------------------------------------

    async def upsert_entity(self, name: str, entity_class: str, **fields: Any) -> records.Entity:
        """Create the entity, or return the one of this name and class (``created`` says
        which); ``fields``: description, aliases."""
        return await self._run(calls.upsert_entity(name, entity_class, fields))

    async def entities(
        self, q: str, limit: int = 10, entity_class: str | None = None
    ) -> list[records.EntityHit]:
        """Entities by name or alias, best match first."""
        return await self._run(calls.entities(q, limit, entity_class))

    async def entity(self, entity_id: Id) -> records.Entity:
        return await self._run(calls.entity(entity_id))

    async def link(
        self, from_id: Id, to_id: Id, rel_type: str, confidence: float = 1.0
    ) -> records.Link:
        """``from_id -rel_type-> to_id`` (and its inverse)."""
        return await self._run(calls.link(from_id, to_id, rel_type, confidence))

    async def unlink(self, from_id: Id, to_id: Id, rel_type: str) -> int:
        """How many edges were removed (with the inverse)."""
        return await self._run(calls.unlink(from_id, to_id, rel_type))

    async def relations(self, node_id: Id, *, closed: bool = False) -> list[records.Relation]:
        """A node's relations and mentions (``closed``: those that no longer hold too)."""
        return await self._run(calls.relations(node_id, closed))

    async def schema(self) -> dict[str, Any]:
        """The tenant's relation catalogue: classes and predicates."""
        return await self._run(calls.schema())

    async def add_predicate(
        self, name: str, subject_classes: list[str], object_classes: list[str], **fields: Any
    ) -> dict[str, Any]:
        """``fields``: inverse, symmetric, description, new_classes, single_valued."""
        return await self._run(calls.add_predicate(name, subject_classes, object_classes, fields))

    # -- the tenant -----------------------------------------------------------------------------

    async def stats(self) -> dict[str, Any]:
        return await self._run(calls.stats())

    async def capabilities(self) -> dict[str, Any]:
        return await self._run(calls.capabilities())

    async def settings(self) -> records.TenantSettings:
        return await self._run(calls.settings())

    async def change_settings(self, **changes: Any) -> records.TenantSettings:
        """``llm_model``, ``multi_query``, ``extraction_prompt``; ``None`` resets one."""
        return await self._run(calls.change_settings(changes))

    async def create_token(self, scopes: list[str], user_id: str | None = None) -> records.Token:
        """A new token of the tenant (admin scope); ``user_id`` binds it to that end user."""
        return await self._run(calls.create_token(scopes, user_id))

    async def erase_user(self, user_id: str) -> records.Receipt:
        """Erase one end user's memories and every trace of them (admin scope)."""
        return await self._run(calls.erase_user(user_id))

    # -- the server admin -----------------------------------------------------------------------

    async def export_tenant(self, tenant_id: Id, **filters: Any) -> list[dict[str, Any]]:
        """A tenant's archive (server admin token): its records, the header first and the
        trailer last (``knowmind tenant export`` writes a large one to a file); ``filters``:
        user_id, agent_id, session_id, occurred_after, occurred_before."""
        return await self._run(calls.export_tenant(tenant_id, filters))
