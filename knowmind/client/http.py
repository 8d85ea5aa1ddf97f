"""The clients: ``Knowmind`` (blocking) and ``AsyncKnowmind`` (asyncio), the same methods.

Both retry what is worth retrying — 429 and 503 (after the server's ``Retry-After``, capped),
and a connection that could not be made — with exponential backoff, ``retries`` times; every
other error is raised at once as :class:`KnowmindAPIError` with the server's detail and field.
A write is retried only when the server did not take it (429/503 are refusals, and the server's
writes are idempotent by content), so a retry cannot store anything twice.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

import httpx
import msgspec

from knowmind.client.types import (
    BatchResult,
    Conversation,
    Document,
    Job,
    KnowmindAPIError,
    Memory,
    MemoryPage,
    Recall,
    Remembered,
    Speaker,
)

__all__ = ["CONVERSATION_PART", "AsyncKnowmind", "Knowmind", "RetryPolicy"]

T = TypeVar("T")
_RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    retries: int = 4
    backoff_s: float = 0.5  # doubled per attempt
    max_wait_s: float = 30.0

    def wait_s(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds before the next attempt: the server's Retry-After if it gave one."""
        hinted = response.headers.get("retry-after") if response is not None else None
        try:
            wait = float(hinted) if hinted is not None else self.backoff_s * 2**attempt
        except ValueError:
            wait = self.backoff_s * 2**attempt
        return min(max(wait, 0.0), self.max_wait_s)


def _decode(response: httpx.Response, kind: type[T]) -> T:
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):  # a proxy's page or a bare string
            body = {}
        detail = str(body.get("detail") or body.get("error") or response.reason_phrase)
        raise KnowmindAPIError(response.status_code, detail, body.get("field"))
    return msgspec.json.decode(response.content, type=kind)


def _flag(wait: bool) -> dict[str, str]:
    return {"wait": "true" if wait else "false"}


def _connection(url: str, token: str, timeout_s: float) -> dict[str, Any]:
    """What both clients' httpx clients are made with."""
    return {
        "base_url": url.rstrip("/"),
        "headers": {"Authorization": f"Bearer {token}"},
        "timeout": timeout_s,
    }


def _json(value: Any) -> Any:
    """Request bodies: UUIDs and datetimes as strings, ``None`` fields left out."""
    return msgspec.to_builtins({k: v for k, v in value.items() if v is not None})


#: Messages per request of ``remember_conversation`` (the server's limit): a longer conversation
#: is sent in parts, each with the position of its first message (``offset``).
CONVERSATION_PART = 1000
_CONVERSATION = "/v1/memories/conversation"


def _conversation_body(
    messages: list[dict[str, Any]], offset: int, session_id: str | None, fields: dict[str, Any]
) -> dict[str, Any]:
    body: dict[str, Any] = _json({**fields, "session_id": session_id, "offset": offset})
    return body | {"messages": [_json(m) for m in messages]}


def _conversation_parts(count: int, part: int) -> list[tuple[int, int]]:
    return [(start, min(count, start + part)) for start in range(0, count, part)]


def _merged(parts: list[tuple[int, Conversation]]) -> Conversation:
    """One result for a conversation sent in parts (``parts``: first message, result)."""
    speakers: dict[tuple[str, str], Speaker] = {}
    for _, done in parts:
        for speaker in done.speakers:
            known = speakers.get((speaker.name, speaker.entity_class))
            if known is None or known.id is None:
                speakers[(speaker.name, speaker.entity_class)] = speaker
    turns = [
        msgspec.structs.replace(turn, index=turn.index + start)
        for start, done in parts
        for turn in done.turns
    ]
    created = sum(done.created for _, done in parts)
    return Conversation(
        session_id=parts[0][1].session_id,
        status="created" if created else "unchanged",
        created=created,
        unchanged=sum(done.unchanged for _, done in parts),
        turns=turns,
        speakers=list(speakers.values()),
    )


class Knowmind:
    """A blocking client: ``Knowmind("http://host:8080", "kmt_…").recall("Wer …?")``."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.Client(transport=transport, **_connection(url, token, timeout_s))

    def __enter__(self) -> Knowmind:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, kind: type[T], **kwargs: Any) -> T:
        for attempt in range(self.retry.retries + 1):
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.ConnectError:
                if attempt == self.retry.retries:
                    raise
                time.sleep(self.retry.wait_s(attempt, None))
                continue
            if response.status_code in _RETRY_STATUSES and attempt < self.retry.retries:
                time.sleep(self.retry.wait_s(attempt, response))
                continue
            return _decode(response, kind)
        raise AssertionError("unreachable")

    def remember(self, content: str, **fields: Any) -> Remembered:
        """``fields``: title, memory_type, tags, source, domain, metadata, relations,
        occurred_at (a datetime or ISO 8601), speaker, role, user_id, agent_id, session_id."""
        return self._call(
            "POST", "/v1/memories", Remembered, json=_json({"content": content, **fields})
        )

    def remember_many(self, items: list[dict[str, Any]]) -> BatchResult:
        """Up to 100 memories (each like ``remember``'s arguments), per-item results."""
        body = {"items": [_json(item) for item in items]}
        return self._call("POST", "/v1/memories/batch", BatchResult, json=body)

    def remember_conversation(
        self,
        messages: list[dict[str, Any]],
        *,
        session_id: str | None = None,
        offset: int = 0,
        **fields: Any,
    ) -> Conversation:
        """Each message (``content``, ``speaker``, ``role``, ``occurred_at``, ``id``) a memory;
        ``fields``: metadata, user_id, agent_id, occurred_at. Messages stored already answer
        ``unchanged``. More than ``CONVERSATION_PART`` messages (or a part over the server's
        body limit) are sent in parts of the same session, each with its offset."""
        parts: list[tuple[int, Conversation]] = []

        def send(start: int, end: int) -> None:
            nonlocal session_id
            body = _conversation_body(messages[start:end], offset + start, session_id, fields)
            try:
                done = self._call("POST", _CONVERSATION, Conversation, json=body)
            except KnowmindAPIError as exc:
                if exc.status != 413 or end - start < 2:
                    raise
                send(start, (start + end) // 2)
                send((start + end) // 2, end)
                return
            session_id = done.session_id
            parts.append((start, done))

        for start, end in _conversation_parts(len(messages), CONVERSATION_PART) or [(0, 0)]:
            send(start, end)
        return _merged(parts)

    def recall(self, query: str, k: int = 5, min_score: float = 0.0, **options: Any) -> Recall:
        """Each hit's ``score`` is the probability (0–1) that it answers the question;
        ``min_score`` leaves out the hits below it. ``options``: filters (e.g. ``{"user_id":
        "u1", "occurred_after": datetime(…)}``), hops, stages, rerank, weights, fusion,
        ranker, explain, as_of, known_at."""
        body = _json({"query": query, "k": k, "min_score": min_score, **options})
        return self._call("POST", "/v1/recall", Recall, json=body)

    def memory(self, memory_id: UUID | str) -> Memory:
        return self._call("GET", f"/v1/memories/{memory_id}", Memory)

    def memories(self, page_size: int = 100, **filters: Any) -> Iterator[Memory]:
        """Every memory, newest first, page by page (the cursor is followed for you);
        ``filters``: user_id, agent_id, session_id, occurred_after, occurred_before."""
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": page_size} | ({"cursor": cursor} if cursor else {})
            params |= _json(filters)
            page = self._call("GET", "/v1/memories", MemoryPage, params=params)
            yield from page.items
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def upload_document(
        self, content: str, title: str | None = None, *, wait: bool = False, **fields: Any
    ) -> Document:
        """A large document is ``accepted`` and stored by a job unless ``wait``."""
        body = _json({"content": content, "title": title, **fields})
        return self._call("POST", "/v1/documents", Document, json=body, params=_flag(wait))

    def job(self, job_id: UUID | str) -> Job:
        return self._call("GET", f"/v1/jobs/{job_id}", Job)

    def wait_for_job(self, job_id: UUID | str, timeout_s: float = 300.0) -> Job:
        deadline = time.monotonic() + timeout_s
        while True:
            job = self.job(job_id)
            if job.status in ("done", "failed") or time.monotonic() > deadline:
                return job
            time.sleep(0.25)

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/v1/stats", dict)


class AsyncKnowmind:
    """The asyncio twin of :class:`Knowmind`: ``await client.recall("…")``."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http = httpx.AsyncClient(transport=transport, **_connection(url, token, timeout_s))

    async def __aenter__(self) -> AsyncKnowmind:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, path: str, kind: type[T], **kwargs: Any) -> T:
        for attempt in range(self.retry.retries + 1):
            try:
                response = await self._http.request(method, path, **kwargs)
            except httpx.ConnectError:
                if attempt == self.retry.retries:
                    raise
                await asyncio.sleep(self.retry.wait_s(attempt, None))
                continue
            if response.status_code in _RETRY_STATUSES and attempt < self.retry.retries:
                await asyncio.sleep(self.retry.wait_s(attempt, response))
                continue
            return _decode(response, kind)
        raise AssertionError("unreachable")

    async def remember(self, content: str, **fields: Any) -> Remembered:
        body = _json({"content": content, **fields})
        return await self._call("POST", "/v1/memories", Remembered, json=body)

    async def remember_many(self, items: list[dict[str, Any]]) -> BatchResult:
        body = {"items": [_json(item) for item in items]}
        return await self._call("POST", "/v1/memories/batch", BatchResult, json=body)

    async def remember_conversation(
        self,
        messages: list[dict[str, Any]],
        *,
        session_id: str | None = None,
        offset: int = 0,
        **fields: Any,
    ) -> Conversation:
        """See :meth:`Knowmind.remember_conversation`."""
        parts: list[tuple[int, Conversation]] = []

        async def send(start: int, end: int) -> None:
            nonlocal session_id
            body = _conversation_body(messages[start:end], offset + start, session_id, fields)
            try:
                done = await self._call("POST", _CONVERSATION, Conversation, json=body)
            except KnowmindAPIError as exc:
                if exc.status != 413 or end - start < 2:
                    raise
                await send(start, (start + end) // 2)
                await send((start + end) // 2, end)
                return
            session_id = done.session_id
            parts.append((start, done))

        for start, end in _conversation_parts(len(messages), CONVERSATION_PART) or [(0, 0)]:
            await send(start, end)
        return _merged(parts)

    async def recall(
        self, query: str, k: int = 5, min_score: float = 0.0, **options: Any
    ) -> Recall:
        body = _json({"query": query, "k": k, "min_score": min_score, **options})
        return await self._call("POST", "/v1/recall", Recall, json=body)

    async def memory(self, memory_id: UUID | str) -> Memory:
        return await self._call("GET", f"/v1/memories/{memory_id}", Memory)

    async def memories(self, page_size: int = 100, **filters: Any) -> AsyncIterator[Memory]:
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": page_size} | ({"cursor": cursor} if cursor else {})
            params |= _json(filters)
            page = await self._call("GET", "/v1/memories", MemoryPage, params=params)
            for memory in page.items:
                yield memory
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    async def upload_document(
        self, content: str, title: str | None = None, *, wait: bool = False, **fields: Any
    ) -> Document:
        body = _json({"content": content, "title": title, **fields})
        return await self._call("POST", "/v1/documents", Document, json=body, params=_flag(wait))

    async def job(self, job_id: UUID | str) -> Job:
        return await self._call("GET", f"/v1/jobs/{job_id}", Job)

    async def wait_for_job(self, job_id: UUID | str, timeout_s: float = 300.0) -> Job:
        deadline = time.monotonic() + timeout_s
        while True:
            job = await self.job(job_id)
            if job.status in ("done", "failed") or time.monotonic() > deadline:
                return job
            await asyncio.sleep(0.25)

    async def stats(self) -> dict[str, Any]:
        return await self._call("GET", "/v1/stats", dict)
