"""A language model behind OpenAI's chat-completions protocol (``POST {base}/chat/completions``):
Ollama, vLLM, llama.cpp's server, hosted APIs. ``KNOWMIND_LLM_BASE_URL`` is the API root
(``http://localhost:11434/v1``), ``KNOWMIND_LLM_API_KEY`` its bearer key (never logged).

A refused connection, a timeout, 429 and 5xx are retried ``KNOWMIND_LLM_RETRIES`` times with
backoff; then, as for any other refusal (an unknown model: 404), :class:`LLMUnavailableError`
says what happened.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import httpx
import structlog

from knowmind.models.llm import (
    Completion,
    LLMSetup,
    LLMUnavailableError,
    Message,
    chat_body,
)

__all__ = ["OpenAICompatibleLLM"]

log = structlog.get_logger(__name__)
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_BACKOFF_S = 0.5


class OpenAICompatibleLLM:
    provider = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        retries: int = 2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.retries = max(0, retries)
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._shared = False  # a twin for another model shares this pool (with_model)
        self._http = httpx.AsyncClient(
            base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport
        )

    def with_model(self, model: str) -> OpenAICompatibleLLM:
        """The same server (and connection pool) asked for another model."""
        twin = object.__new__(OpenAICompatibleLLM)
        twin.model, twin.base_url, twin.retries, twin._http = (
            model, self.base_url, self.retries, self._http,
        )  # fmt: skip
        twin._shared = True
        return twin

    @classmethod
    def open(cls, setup: LLMSetup) -> OpenAICompatibleLLM:
        if not setup.base_url:
            raise LLMUnavailableError("KNOWMIND_LLM_PROVIDER=openai needs KNOWMIND_LLM_BASE_URL")
        if not setup.model:
            raise LLMUnavailableError("KNOWMIND_LLM_PROVIDER=openai needs KNOWMIND_LLM_MODEL")
        return cls(
            setup.base_url,
            setup.model,
            api_key=setup.api_key,
            timeout_s=setup.timeout_s,
            retries=setup.retries,
        )

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion:
        body = chat_body(messages, max_tokens, temperature, stream=False, model=self.model)
        response = await self._post(body)
        try:
            answer = response.json()
            choice = answer["choices"][0]
            usage = answer.get("usage") or {}
            return Completion(
                text=choice["message"]["content"] or "",
                model=str(answer.get("model") or self.model),
                prompt_tokens=int(usage.get("prompt_tokens", 0)),
                completion_tokens=int(usage.get("completion_tokens", 0)),
                finish_reason=choice.get("finish_reason"),
            )
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise LLMUnavailableError(f"{self._where()}: an answer without a completion") from exc

    async def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0
    ) -> AsyncIterator[str]:
        body = chat_body(messages, max_tokens, temperature, stream=True, model=self.model)
        try:
            async with self._http.stream("POST", "/chat/completions", json=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise LLMUnavailableError(self._refusal(response))
                async for line in response.aiter_lines():
                    piece = _sse_piece(line)
                    if piece is None:
                        break
                    if piece:
                        yield piece
        except httpx.HTTPError as exc:
            raise LLMUnavailableError(f"{self._where()}: {_describe(exc)}") from exc

    async def _post(self, body: dict[str, Any]) -> httpx.Response:
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = await self._http.post("/chat/completions", json=body)
            except httpx.HTTPError as exc:
                if last:
                    raise LLMUnavailableError(f"{self._where()}: {_describe(exc)}") from exc
            else:
                if response.status_code < 400:
                    return response
                if last or response.status_code not in _RETRY_STATUSES:
                    raise LLMUnavailableError(self._refusal(response))
            await asyncio.sleep(_BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    def _where(self) -> str:
        """How errors name the server to tenants: the model, never the URL (it may carry
        credentials) nor the server's own error text (logged instead)."""
        return f"the language model server (model {self.model})"

    def _refusal(self, response: httpx.Response) -> str:
        log.warning(
            "llm.refused", status=response.status_code, model=self.model, body=response.text[:300]
        )
        unknown = " (unknown model?)" if response.status_code == 404 else ""
        return f"{self._where()}: HTTP {response.status_code}{unknown}"

    async def close(self) -> None:
        if not self._shared:  # a twin leaves the pool to its origin
            await self._http.aclose()


def _sse_piece(line: str) -> str | None:
    """The text of one ``data:`` line of a streamed completion; "" for other lines, None at
    the end (``data: [DONE]``)."""
    if not line.startswith("data:"):
        return ""
    data = line[5:].strip()
    if data == "[DONE]":
        return None
    try:
        chunk = json.loads(data)
    except ValueError:
        return ""
    if not isinstance(chunk, dict):
        return ""
    if chunk.get("error"):
        raise LLMUnavailableError("the language model server failed while streaming")
    choices = chunk.get("choices") or [{}]
    return str((choices[0].get("delta") or {}).get("content") or "")


def _describe(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.ConnectError):
        return "cannot connect (is the server running?)"
    return type(exc).__name__
