"""``Knowmind``: the blocking client, a method per REST operation a tenant token may call.

Both clients retry what is worth retrying — 429 and 503 (after the server's ``Retry-After``,
capped), and a connection that could not be made — with exponential backoff, ``retries`` times;
every other error is raised at once as :class:`KnowmindAPIError` with the server's detail and
field. A write is retried only when the server did not take it (429/503 are refusals, and the
server's writes are idempotent by content), so a retry cannot store anything twice.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any
from uuid import UUID

from knowmind.client import calls
from knowmind.client import types as records
from knowmind.client.http import SyncTransport

__all__ = ["Knowmind"]

Id = UUID | str


class Knowmind(SyncTransport):
    """A blocking client: ``Knowmind("http://host:8080", "kmt_…").recall("Wer …?")``."""

    def __enter__(self) -> Knowmind:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- memories -------------------------------------------------------------------------------

    def remember(self, content: str, *, wait: bool = False, **fields: Any) -> records.Remembered:
        """``fields``: title, memory_type, tags, source, domain, metadata, relations,
        occurred_at (a datetime or ISO 8601), speaker, role, user_id, agent_id, session_id;
        ``wait``: answer once the extraction job ran (``records.Remembered.job``)."""
        return self._run(calls.remember(content, wait, fields))

    def remember_many(self, items: list[dict[str, Any]]) -> records.BatchResult:
        """Up to 100 memories (each like ``remember``'s arguments), per-item results."""
        return self._run(calls.remember_many(items))

    def memory(self, memory_id: Id) -> records.Memory:
        return self._run(calls.memory(memory_id))

    def memories(self, page_size: int = 100, **filters: Any) -> Iterator[records.Memory]:
        """Every memory, newest first, page by page (the cursor is followed for you);
        ``filters``: user_id, agent_id, session_id, occurred_after, occurred_before."""
        cursor: str | None = None
        while True:
            page = self._run(calls.memory_page(page_size, cursor, filters))
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def history(self, memory_id: Id) -> records.History:
        """The memory's supersessions and automatic fact updates: who, what, when."""
        return self._run(calls.history(memory_id))

    def supersede(
        self,
        memory_id: Id,
        new_content: str,
        *,
        new_title: str | None = None,
        update_reason: str | None = None,
    ) -> records.Remembered:
        """Update a fact bi-temporally: the old memory stops being valid now, the new one
        (returned) holds from now; history keeps both."""
        return self._run(calls.supersede(memory_id, new_content, new_title, update_reason))

    update_fact = supersede  # MCP's name for it

    def delete_memory(self, memory_id: Id) -> None:
        self._run(calls.delete_memory(memory_id))

    def erase_memory(self, memory_id: Id) -> records.Receipt:
        """Erase every trace of the memory; the receipt counts what went."""
        return self._run(calls.erase_memory(memory_id))

    # -- recall and answers ---------------------------------------------------------------------

    def recall(
        self, query: str, k: int = 5, min_score: float = 0.0, **options: Any
    ) -> records.Recall:
        """Each hit's ``score`` is the probability (0–1) that it answers the question;
        ``min_score`` leaves out the hits below it. ``options``: filters (e.g. ``{"user_id":
        "u1", "occurred_after": datetime(…)}``), hops, stages, rerank, weights, fusion,
        ranker, explain, as_of, known_at, reference_time."""
        return self._run(calls.recall(query, k, min_score, options))

    def recall_at_time(
        self, query: str, as_of: datetime | str, k: int = 5, **options: Any
    ) -> records.Recall:
        """What was valid at ``as_of`` (``known_at``: as the store knew it then)."""
        return self._run(calls.recall_at_time(query, as_of, k, options))

    def answer(self, question: str, **options: Any) -> records.Answer:
        """An answer citing its passages; ``options``: k, method, rerank, compress,
        parent_context, filters, llm_model, max_tokens, conversation_id, share_conversation."""
        return self._run(calls.answer(question, False, options))

    def answer_stream(self, question: str, **options: Any) -> Iterator[records.AnswerEvent]:
        """The answer as it is generated: ``token`` events, then ``done`` with the result."""
        return self._events(calls.answer(question, True, options))

    # -- documents and jobs ---------------------------------------------------------------------

    def upload_document(
        self, content: str, title: str | None = None, *, wait: bool = False, **fields: Any
    ) -> records.Document:
        """A large document is ``accepted`` and stored by a job unless ``wait``; ``fields``:
        source, relations, replace_document_id, build_tree."""
        return self._run(calls.upload_document(content, title, wait, fields))

    def delete_document(self, document_id: Id) -> None:
        self._run(calls.delete_document(document_id))

    def erase_document(self, document_id: Id) -> records.Receipt:
        return self._run(calls.erase_document(document_id))

    def job(self, job_id: Id) -> records.Job:
        return self._run(calls.job(job_id))

    def wait_for_job(self, job_id: Id, timeout_s: float = 300.0) -> records.Job:
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.job(job_id)
            if job.status in ("done", "failed") or time.monotonic() > deadline:
                return job
            time.sleep(0.25)

    # -- the graph ------------------------------------------------------------------------------

    def upsert_entity(self, name: str, entity_class: str, **fields: Any) -> records.Entity:
        """Create the entity, or return the one of this name and class (``created`` says
        which); ``fields``: description, aliases."""
        return self._run(calls.upsert_entity(name, entity_class, fields))

    def entities(
        self, q: str, limit: int = 10, entity_class: str | None = None
    ) -> list[records.EntityHit]:
        """Entities by name or alias, best match first."""
        return self._run(calls.entities(q, limit, entity_class))

    def entity(self, entity_id: Id) -> records.Entity:
        return self._run(calls.entity(entity_id))

    def link(self, from_id: Id, to_id: Id, rel_type: str, confidence: float = 1.0) -> records.Link:
        """``from_id -rel_type-> to_id`` (and its inverse)."""
        return self._run(calls.link(from_id, to_id, rel_type, confidence))

    def unlink(self, from_id: Id, to_id: Id, rel_type: str) -> int:
        """How many edges were removed (with the inverse)."""
        return self._run(calls.unlink(from_id, to_id, rel_type))

    def relations(self, node_id: Id, *, closed: bool = False) -> list[records.Relation]:
        """A node's relations and mentions (``closed``: those that no longer hold too)."""
        return self._run(calls.relations(node_id, closed))

    def schema(self) -> dict[str, Any]:
        """The tenant's relation catalogue: classes and predicates."""
        return self._run(calls.schema())

    def add_predicate(
        self, name: str, subject_classes: list[str], object_classes: list[str], **fields: Any
    ) -> dict[str, Any]:
        """``fields``: inverse, symmetric, description, new_classes, single_valued."""
        return self._run(calls.add_predicate(name, subject_classes, object_classes, fields))

    # -- the tenant -----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return self._run(calls.stats())

    def capabilities(self) -> dict[str, Any]:
        return self._run(calls.capabilities())

    def settings(self) -> records.TenantSettings:
        return self._run(calls.settings())

    def change_settings(self, **changes: Any) -> records.TenantSettings:
        """``llm_model``, ``multi_query``, ``extraction_prompt``; ``None`` resets one."""
        return self._run(calls.change_settings(changes))

    def create_token(self, scopes: list[str], user_id: str | None = None) -> records.Token:
        """A new token of the tenant (admin scope); ``user_id`` binds it to that end user."""
        return self._run(calls.create_token(scopes, user_id))

    def erase_user(self, user_id: str) -> records.Receipt:
        """Erase one end user's memories and every trace of them (admin scope)."""
        return self._run(calls.erase_user(user_id))

    # -- the server admin -----------------------------------------------------------------------

    def export_tenant(self, tenant_id: Id, **filters: Any) -> list[dict[str, Any]]:
        """A tenant's archive (server admin token): its records, the header first and the
        trailer last (``knowmind tenant export`` writes a large one to a file); ``filters``:
        user_id, agent_id, session_id, occurred_after, occurred_before."""
        return self._run(calls.export_tenant(tenant_id, filters))
