"""What both clients stand on: the transports ``SyncTransport`` and ``AsyncTransport`` run a
:class:`~knowmind.client.calls.Call` (``Knowmind`` and ``AsyncKnowmind`` in sync.py and aio.py
are a method per REST operation over them).

Both retry what is worth retrying — 429 and 503 (after the server's ``Retry-After``, capped),
and a connection that could not be made — with exponential backoff, ``retries`` times; every
other error is raised at once as :class:`KnowmindAPIError` with the server's detail and field.
A write is retried only when the server did not take it (429/503 are refusals, and the server's
writes are idempotent by content), so a retry cannot store anything twice.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import httpx
import msgspec

from knowmind.client.calls import Call, json_body
from knowmind.client.types import (
    Answer,
    AnswerEvent,
    Conversation,
    KnowmindAPIError,
    Speaker,
)

__all__ = ["CONVERSATION_PART", "AsyncTransport", "RetryPolicy", "SyncTransport"]

T = TypeVar("T")
_HttpxTransport = TypeVar("_HttpxTransport", httpx.BaseTransport, httpx.AsyncBaseTransport)
_HttpxClient = TypeVar("_HttpxClient", httpx.Client, httpx.AsyncClient)
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


def _raise_for(response: httpx.Response) -> None:
    """A :class:`KnowmindAPIError` for an answer that is not a success."""
    if response.status_code >= 400:
        try:
            body = response.json()
        except ValueError:
            body = {}
        if not isinstance(body, dict):  # a proxy's page or a bare string
            body = {}
        detail = str(body.get("detail") or body.get("error") or response.reason_phrase)
        raise KnowmindAPIError(response.status_code, detail, body.get("field"))


def _decode(response: httpx.Response, decode: Callable[[bytes], T]) -> T:
    _raise_for(response)
    return decode(response.content)


_json = json_body


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


class _EventParser:
    """Server-sent events line by line: an :class:`AnswerEvent` at each blank line."""

    def __init__(self) -> None:
        self.event = "message"
        self.data: list[str] = []

    def feed(self, line: str) -> AnswerEvent | None:
        if line.startswith(":"):  # a comment (a keep-alive)
            return None
        if line:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "event":
                self.event = value
            elif name == "data":
                self.data.append(value)
            return None
        if not self.data:
            return None
        event, data = self.event, "\n".join(self.data)
        self.event, self.data = "message", []
        if event == "done":
            return AnswerEvent("done", result=msgspec.json.decode(data, type=Answer))
        return AnswerEvent(event, text=data)


def _request(http: httpx.Client | httpx.AsyncClient, call: Call[Any]) -> httpx.Request:
    return http.build_request(call.method, call.path, **call.request())


class _Transport(ABC, Generic[_HttpxTransport, _HttpxClient]):
    """What both transports are made with: the server's URL and a token, the retry policy, and
    optionally the httpx transport their httpx client sends through (a test's mock one)."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        timeout_s: float = 60.0,
        retry: RetryPolicy | None = None,
        transport: _HttpxTransport | None = None,
    ) -> None:
        self.retry = retry or RetryPolicy()
        self._http: _HttpxClient = self._client(
            transport,
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    @abstractmethod
    def _client(self, transport: _HttpxTransport | None, **options: Any) -> _HttpxClient:
        """The httpx client (blocking or asyncio) the transport sends with."""


class SyncTransport(_Transport[httpx.BaseTransport, httpx.Client]):
    """Runs calls blocking, retrying refusals (429, 503) and connections not made."""

    def _client(self, transport: httpx.BaseTransport | None, **options: Any) -> httpx.Client:
        return httpx.Client(transport=transport, **options)

    def close(self) -> None:
        self._http.close()

    def _send(self, call: Call[Any], stream: bool = False) -> httpx.Response:
        for attempt in range(self.retry.retries + 1):
            try:
                response = self._http.send(_request(self._http, call), stream=stream)
            except httpx.ConnectError:
                if attempt == self.retry.retries:
                    raise
                time.sleep(self.retry.wait_s(attempt, None))
                continue
            if response.status_code in _RETRY_STATUSES and attempt < self.retry.retries:
                response.close()
                time.sleep(self.retry.wait_s(attempt, response))
                continue
            return response
        raise AssertionError("unreachable")

    def _run(self, call: Call[T]) -> T:
        return _decode(self._send(call), call.decode)

    def _events(self, call: Call[Any]) -> Iterator[AnswerEvent]:
        response = self._send(call, stream=True)
        try:
            if response.status_code >= 400:
                response.read()
                _raise_for(response)
            parser = _EventParser()
            for line in itertools.chain(response.iter_lines(), [""]):
                if (event := parser.feed(line)) is not None:
                    yield event
        finally:
            response.close()

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
                done = self._run(_conversation_call(body))
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


class AsyncTransport(_Transport[httpx.AsyncBaseTransport, httpx.AsyncClient]):
    """The asyncio twin of :class:`SyncTransport`."""

    def _client(
        self, transport: httpx.AsyncBaseTransport | None, **options: Any
    ) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=transport, **options)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(self, call: Call[Any], stream: bool = False) -> httpx.Response:
        for attempt in range(self.retry.retries + 1):
            try:
                response = await self._http.send(_request(self._http, call), stream=stream)
            except httpx.ConnectError:
                if attempt == self.retry.retries:
                    raise
                await asyncio.sleep(self.retry.wait_s(attempt, None))
                continue
            if response.status_code in _RETRY_STATUSES and attempt < self.retry.retries:
                await response.aclose()
                await asyncio.sleep(self.retry.wait_s(attempt, response))
                continue
            return response
        raise AssertionError("unreachable")

    async def _run(self, call: Call[T]) -> T:
        return _decode(await self._send(call), call.decode)

    async def _events(self, call: Call[Any]) -> AsyncIterator[AnswerEvent]:
        response = await self._send(call, stream=True)
        try:
            if response.status_code >= 400:
                await response.aread()
                _raise_for(response)
            parser = _EventParser()
            async for line in response.aiter_lines():
                if (event := parser.feed(line)) is not None:
                    yield event
            if (event := parser.feed("")) is not None:
                yield event
        finally:
            await response.aclose()

    async def remember_conversation(
        self,
        messages: list[dict[str, Any]],
        *,
        session_id: str | None = None,
        offset: int = 0,
        **fields: Any,
    ) -> Conversation:
        """See :meth:`SyncTransport.remember_conversation`."""
        parts: list[tuple[int, Conversation]] = []

        async def send(start: int, end: int) -> None:
            nonlocal session_id
            body = _conversation_body(messages[start:end], offset + start, session_id, fields)
            try:
                done = await self._run(_conversation_call(body))
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


def _conversation_call(body: dict[str, Any]) -> Call[Conversation]:
    return Call("POST", _CONVERSATION, lambda c: msgspec.json.decode(c, type=Conversation), body)
