"""Language models behind one small interface, chosen by name from a registry.

``KNOWMIND_LLM_PROVIDER`` names the provider:

- ``embedded``: a small instruct model (GGUF) in this process through llama.cpp (``xllamacpp``),
  offline on the CPU — the default where its weights are on the machine (``knowmind models
  pull-llm``); tiny, so it exercises the mechanics, not answer quality (models/llm_embedded.py);
- ``openai``: any server speaking OpenAI's chat-completions protocol — Ollama, vLLM, llama.cpp's
  server, hosted APIs (``KNOWMIND_LLM_BASE_URL``, ``KNOWMIND_LLM_API_KEY``): the production path
  (models/llm_openai.py);
- ``auto`` (default): ``embedded`` when its weights are here, else none (and said so);
- ``none``: no language model.

The registry of providers and ``build_llm`` are in ``models/llm_factory.py``, apart from the
backends (which import only this module's types).

A provider that cannot answer (down, timed out, an unknown model) raises
:class:`LLMUnavailableError` with the reason; callers report it as ``degraded``, never
substitute another model silently.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from knowmind.settings import LLMSetup

__all__ = [
    "LLM",
    "Completion",
    "LLMSetup",
    "LLMSpecError",
    "LLMUnavailableError",
    "Message",
    "chat_body",
    "resolve_llm_model",
]

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": ...}


class LLMUnavailableError(RuntimeError):
    """The provider could not answer; the message says why (for ``degraded``)."""


class LLMSpecError(ValueError):
    """``KNOWMIND_LLM_PROVIDER`` names no known provider."""


@dataclass(frozen=True, slots=True)
class Completion:
    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str | None = None  # "stop", "length", …


class LLM(Protocol):
    provider: str
    model: str

    async def complete(
        self, messages: Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0
    ) -> Completion: ...

    def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0
    ) -> AsyncIterator[str]:
        """The completion's text piece by piece, as the model produces it."""
        ...

    async def close(self) -> None: ...


def chat_body(
    messages: Sequence[Message],
    max_tokens: int,
    temperature: float,
    *,
    stream: bool,
    model: str | None = None,
) -> dict[str, Any]:
    """An OpenAI chat-completions request body (llama.cpp's in-process server reads the same)."""
    body: dict[str, Any] = {"model": model} if model else {}
    return body | {
        "messages": [dict(m) for m in messages],
        "max_tokens": max_tokens,
        "temperature": temperature,
        "stream": stream,
    }


def resolve_llm_model(*candidates: str | None, default: str) -> str:
    """The most specific model named: the request's, then the tenant's, then the server's."""
    return next((c for c in candidates if c), default)
