"""The language model providers by name (``KNOWMIND_LLM_PROVIDER``, see ``models/llm.py``) and
the factory that builds the configured one. The backends are imported lazily, so an unused
provider's libraries are never loaded, and import only ``models/llm.py``'s types."""

from __future__ import annotations

from collections.abc import Callable

from knowmind.models.llm import LLM, LLMSetup, LLMSpecError, LLMUnavailableError

__all__ = ["LLM_PROVIDERS", "build_llm", "check_llm_provider"]


def _embedded(setup: LLMSetup) -> LLM:
    from knowmind.models.llm_embedded import EmbeddedLLM

    return EmbeddedLLM.open(setup)


def _openai(setup: LLMSetup) -> LLM:
    from knowmind.models.llm_openai import OpenAICompatibleLLM

    return OpenAICompatibleLLM.open(setup)


LLM_PROVIDERS: dict[str, Callable[[LLMSetup], LLM]] = {
    "embedded": _embedded,
    "openai": _openai,
}
_CHOICES = ("auto", "none", *LLM_PROVIDERS)


def check_llm_provider(name: str) -> None:
    if name not in _CHOICES:
        raise LLMSpecError(f"KNOWMIND_LLM_PROVIDER={name!r}: expected one of {', '.join(_CHOICES)}")


def build_llm(setup: LLMSetup) -> tuple[LLM | None, str | None]:
    """The configured model, or None and why there is none (``auto`` without weights, ``none``,
    a provider that cannot start)."""
    check_llm_provider(setup.provider)
    if setup.provider == "none":
        return None, "no language model configured (KNOWMIND_LLM_PROVIDER=none)"
    name = setup.provider
    if name == "auto":
        from knowmind.models.llm_embedded import embedded_weights

        if embedded_weights(setup) is None:
            return None, (
                "auto: the embedded model's weights are not on this machine (knowmind models "
                "pull-llm), and no KNOWMIND_LLM_PROVIDER=openai server is configured"
            )
        name = "embedded"
    try:
        return LLM_PROVIDERS[name](setup), None
    except LLMUnavailableError as exc:
        return None, str(exc)
